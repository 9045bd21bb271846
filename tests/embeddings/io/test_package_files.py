"""``embeddings.io.package_files``: the configs where a wheel puts them and where a checkout keeps them."""

from __future__ import annotations

from sts_lightning.embeddings.io import data_dir, package_files
from sts_lightning.sts import tasks
from tests.paths import ROOT


def test_in_a_checkout_the_configs_are_its_configs_folder():
    assert package_files.CHECKOUT == ROOT and package_files.CONFIG_DIR == ROOT / "configs"
    assert (package_files.CONFIG_DIR / "train.yaml").is_file() and (package_files.CONFIG_DIR / "evaluate.yaml").is_file()
    assert data_dir.CHECKOUT_DATA_DIR == ROOT.parent / "shared" / "data"


def test_the_wheel_maps_configs_to_the_same_place_relative_to_the_module():
    """setup.py installs configs/ as sts_lightning/configs, two levels above embeddings/io/ as here; the wheel test
    (tests/test_setup.py) runs the installed one."""
    setup = (ROOT / "setup.py").read_text()
    assert 'CONFIGS = "configs"' in setup
    relative = package_files.CONFIG_DIR.relative_to(package_files.PACKAGE_ROOT)
    assert relative.as_posix() == "configs"
    assert (package_files.PACKAGE_ROOT / "embeddings" / "io" / "package_files.py").is_file()


def test_without_a_checkout_there_is_no_checkout_data_default(monkeypatch, tmp_path):
    monkeypatch.delenv(tasks.DATA_DIR_ENV, raising=False)
    monkeypatch.setattr(data_dir, "CHECKOUT_DATA_DIR", None)  # what an installed package has
    assert tasks.default_data_dir() is None
    monkeypatch.setenv(tasks.DATA_DIR_ENV, str(tmp_path))
    assert tasks.default_data_dir() == str(tmp_path)
