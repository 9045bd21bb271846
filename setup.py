"""Packages of the distribution: the top-level folders, installed under the one import name ``sts_lightning``.

Why a setup.py: the card keeps ``embeddings/``, ``sts/``, ``runs/``, ``callbacks/``, ... at the repository's top level,
but installing them under those names would shadow other packages (Hugging Face's ``evaluate``, PyPI's ``embeddings``,
``sts``, ``runs``, ``callbacks``). ``package_dir`` maps each folder to ``sts_lightning.<folder>``, and its nested
packages are found here rather than listed by hand in pyproject.toml. ``train.py``, ``evaluate.py`` and
``benchmarks/`` are scripts run from the checkout and are not installed.
"""
from setuptools import find_packages, setup

FOLDERS = ("embeddings", "sts", "lightning_modules", "datamodules", "callbacks", "runs")

packages = ["sts_lightning"]
for folder in FOLDERS:
    packages += [f"sts_lightning.{folder}"] + [f"sts_lightning.{folder}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir={f"sts_lightning.{folder}": folder for folder in FOLDERS})
