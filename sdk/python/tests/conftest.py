"""Shared fixtures: a short temporary directory for unix sockets (their paths
are limited to about 100 bytes, which pytest's tmp_path can exceed)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture
def sock_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="po-")
    yield path
    shutil.rmtree(path, ignore_errors=True)
