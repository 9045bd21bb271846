"""Paths tests need (kept in one place)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "configs"
FIXTURES_DIR = ROOT / "tests" / "fixtures"
SHARED_DATA = ROOT.parent / "shared" / "data"
