"""The polyop command beside the SDK (polyop._binary): what the pure wheel's polyop says, and python -m polyop."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import NoReturn

import hatch_build
import pytest

from polyop import __version__, _binary

ROOT = Path(__file__).resolve().parents[1]


def test_the_message_says_every_way_to_get_polyop_at_this_version() -> None:
    message = _binary.missing_message("1.2.3")
    assert "the polyop binary is not installed" in message
    assert "pip install polyop==1.2.3" in message
    assert "go install github.com/polyop/polyop/cmd/polyop@v1.2.3" in message
    assert "https://github.com/polyop/polyop/releases/tag/v1.2.3" in message


def test_the_message_names_the_platforms_whose_wheels_carry_the_binary() -> None:
    message = " ".join(_binary.missing_message().split())
    named = set(re.findall(r"\b(?:linux|darwin|windows|freebsd)/[a-z0-9]+", message))
    assert named == set(hatch_build.PLATFORM_TAGS)
    for platform, tag in hatch_build.PLATFORM_TAGS.items():
        if platform.startswith("darwin/"):
            assert f"macOS {tag.split('_')[1]} or later" in message


def test_the_pure_wheels_polyop_prints_the_message_and_exits_1() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "polyop"), "version"], capture_output=True, text=True, env=env, check=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (1, "", _binary.missing_message(__version__))


def test_the_fallback_script_is_executable() -> None:
    assert os.access(ROOT / "scripts" / "polyop", os.X_OK)


@pytest.fixture
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment's scripts directory, empty, and the user's and the package's beside it empty too."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setattr(sysconfig, "get_path", lambda name, scheme=None: str(directory if scheme is None else tmp_path / "user"))
    monkeypatch.setattr(_binary, "__file__", str(tmp_path / "site" / "polyop" / "_binary.py"))
    return directory


class Exec(Exception):
    pass


def fake_execv(path: str | os.PathLike[str], args: list[str]) -> NoReturn:
    raise Exec(os.fspath(path), args)


def test_python_m_polyop_runs_the_binary_with_its_arguments(scripts: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = scripts / "polyop"
    binary.write_bytes(b"\x7fELF")
    binary.chmod(0o755)
    monkeypatch.setattr(os, "execv", fake_execv)
    assert _binary.find_binary() == binary
    with pytest.raises(Exec) as exec_:
        _binary.main(["version", "-o", "json"])
    assert exec_.value.args == (str(binary), [str(binary), "version", "-o", "json"])


def test_python_m_polyop_finds_a_binary_installed_with_target_beside_the_package(scripts: Path, tmp_path: Path) -> None:
    binary = tmp_path / "site" / "bin" / "polyop"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"\x7fELF")
    binary.chmod(0o755)
    assert _binary.find_binary() == binary


@pytest.mark.parametrize(("content", "mode"), [(b"#!python\nimport sys\n", 0o755), (b"\x7fELF", 0o644)])
def test_python_m_polyop_without_the_binary_prints_the_message_and_returns_1(
    scripts: Path, capsys: pytest.CaptureFixture[str], content: bytes, mode: int
) -> None:
    # The pure wheel's script, or a file that cannot run, is not the binary.
    (scripts / "polyop").write_bytes(content)
    (scripts / "polyop").chmod(mode)
    assert _binary.find_binary() is None
    assert _binary.main(["version"]) == 1
    assert capsys.readouterr() == ("", _binary.missing_message())
