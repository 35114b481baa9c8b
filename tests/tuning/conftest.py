"""Tuning tests: every test gets its own tuning database and kernel cache (TLE_TUNE_DB, TLE_CACHE_DIR)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tuning_helpers


@pytest.fixture(autouse=True)
def isolated_db(tmp_path, monkeypatch):
    path = str(tmp_path / "tuning.sqlite")
    monkeypatch.setenv("TLE_TUNE_DB", path)
    monkeypatch.setenv("TLE_CACHE_DIR", str(tmp_path / "cache"))
    return path
