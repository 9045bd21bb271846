"""Packages of the distribution: the top-level folders, installed under the one import name ``sts_lightning``.

Why a setup.py: the card keeps ``embeddings/``, ``sts/``, ``runs/``, ``callbacks/``, ``configs/`` ... at the
repository's top level, but installing them under those names would shadow other packages (Hugging Face's
``evaluate``, PyPI's ``embeddings``, ``sts``, ``runs``, ``callbacks``). ``package_dir`` maps each folder to
``sts_lightning.<folder>``, and its nested packages are found here rather than listed by hand in pyproject.toml.

``configs/`` travels as package data (``sts_lightning/configs/**.yaml``): an installed package needs no checkout,
and it lands two levels above ``embeddings/io/package_files.py`` as in a checkout, where every reader looks for it.
Its folders hold no Python, so they are namespace packages of data (PEP 420), listed like the others (setuptools
otherwise warns that it installs data folders it was not told about). ``train.py``, ``evaluate.py`` and
``benchmarks/`` are the checkout's scripts and are not installed: the commands they run are
``sts_lightning/train.py`` and ``sts_lightning/evaluate.py`` (``sts-train``, ``sts-evaluate``, see pyproject.toml).
"""
from setuptools import find_namespace_packages, find_packages, setup

FOLDERS = ("embeddings", "sts", "lightning_modules", "datamodules", "callbacks", "runs")
CONFIGS = "configs"
PLUGIN = "hydra_plugins.sts_lightning_defaults"  # in Hydra's plugin namespace (runs/constructor_defaults.py)

packages = ["sts_lightning"]
for folder in FOLDERS:
    packages += [f"sts_lightning.{folder}"] + [f"sts_lightning.{folder}.{sub}" for sub in find_packages(folder)]
packages += [PLUGIN]  # Hydra imports it when it looks for plugins: it registers the constructors' defaults
packages += [f"sts_lightning.{CONFIGS}"] + [f"sts_lightning.{CONFIGS}.{sub}" for sub in find_namespace_packages(CONFIGS)]
package_dir = {f"sts_lightning.{folder}": folder for folder in (*FOLDERS, CONFIGS)}
config_packages = [name for name in packages if name.startswith(f"sts_lightning.{CONFIGS}")]

setup(packages=packages, package_dir=package_dir, package_data={name: ["*.yaml"] for name in config_packages})
