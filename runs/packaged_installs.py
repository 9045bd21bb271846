"""Every packaged weight a run needs, checked before anything loads (pip metadata, no torch): the missing ones in ONE
line with the pip command.
"""

from __future__ import annotations

from collections.abc import Sequence

from sts_lightning.embeddings.encoders.e5_convert import E5_PACKAGE, E5_VERSION
from sts_lightning.embeddings.encoders.packaged import (
    PIP_PACKAGES,
    installed,
    missing_packages,
    packaged_model,
)
from sts_lightning.embeddings.encoders.packaged import pip_command as pinned_command
from sts_lightning.embeddings.io.user_form import install_models_command
from sts_lightning.embeddings.sources.names import E5_NAMES


def missing_for(names: Sequence[str]) -> dict[str, list[str]]:
    """``{model name: pip packages not installed}`` for the packaged models and e5 sources among ``names``."""
    missing = missing_packages([n for n in names if packaged_model(n) is not None])
    for name in names:
        if name in E5_NAMES and packaged_model(name) is None and not installed(E5_PACKAGE):
            missing.setdefault("multilingual-e5-small", [E5_PACKAGE])
    return missing


def pip_line(packages: Sequence[str]) -> str:
    """The pinned pip command for ``packages`` (the e5 engine's pin where the packaged registry lacks it)."""
    known = [p for p in packages if p in PIP_PACKAGES]
    line = pinned_command(known) if known else "pip install"
    extra = [f"{E5_PACKAGE}=={E5_VERSION}"] if E5_PACKAGE in packages and E5_PACKAGE not in PIP_PACKAGES else []
    return " ".join([line, *extra])


def packaged_installs_problem(names: Sequence[str]) -> str | None:
    """One line naming every packaged model among ``names`` whose pip packages are missing, and the pip command."""
    missing = missing_for(list(dict.fromkeys(names)))
    if not missing:
        return None
    packages = list(dict.fromkeys(p for absent in missing.values() for p in absent))
    listed = ", ".join(f"{name} ({', '.join(absent)})" for name, absent in missing.items())
    return (f"packaged weights not installed: {listed}; install with: {pip_line(packages)}  "
            f"(every default's weights: {install_models_command()})")
