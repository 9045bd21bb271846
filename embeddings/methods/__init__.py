"""The methods, one folder (or module) each, each with its declaration (``declaration.MethodDeclaration``).

A method package's ``__init__`` declares the method and imports nothing heavy, so ``--help`` reads it without
torch; the single modules ``pooling.py`` and ``sbert_wk.py`` have theirs beside them (``<name>_method``).
"""
