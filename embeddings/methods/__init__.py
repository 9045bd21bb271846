"""The methods, one folder (or module) each, each with its declaration (``declaration.MethodDeclaration``).

A method package's ``__init__`` declares the method (``METHOD = MethodDeclaration(...)``) and imports nothing
heavy: ``registry`` collects every declaration, and ``--help`` reads them without loading torch. The maths,
nets, scorers and export formats live in the package's other modules. ``pooling.py`` and ``sbert_wk.py`` are
single modules that much code imports; their declarations sit beside them (``pooling_method``,
``sbert_wk_method``).
"""
