"""The wheel's build hook (hatch_build.py): the platform tags, the binary it accepts, and the wheels hatchling builds
with it."""

from __future__ import annotations

import stat
import struct
import zipfile
from pathlib import Path

import hatch_build
import pytest
from hatchling.builders.wheel import WheelBuilder

from polyop import __version__

ROOT = Path(__file__).resolve().parents[1]


def elf(machine: int) -> bytes:
    """The start of a 64-bit little-endian ELF executable for machine (e_machine)."""
    return b"\x7fELF\x02\x01\x01" + bytes(11) + struct.pack("<H", machine) + bytes(44)


def macho(cpu: int, minimum: tuple[int, int], command: int = 0x32) -> bytes:
    """The start of a 64-bit Mach-O executable for cpu whose one load command (LC_BUILD_VERSION, or
    LC_VERSION_MIN_MACOSX) declares minimum."""
    version = minimum[0] << 16 | minimum[1] << 8
    if command == 0x32:
        load = struct.pack("<IIIIII", command, 24, 1, version, version, 0)
    else:
        load = struct.pack("<IIII", command, 16, version, version)
    return struct.pack("<IiiIIIII", 0xFEEDFACF, cpu, 3, 2, 1, len(load), 0, 0) + load


X86_64_ELF, AARCH64_ELF = elf(62), elf(183)
X86_64_MACOS, ARM64_MACOS = 0x01000007, 0x0100000C


def executable(tmp_path: Path, content: bytes, mode: int = 0o755) -> str:
    path = tmp_path / "polyop"
    path.write_bytes(content)
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize(
    ("platform", "tag"),
    [
        ("linux/amd64", "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64"),
        ("linux/arm64", "py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64"),
        ("darwin/amd64", "py3-none-macosx_12_0_x86_64"),
        ("darwin/arm64", "py3-none-macosx_12_0_arm64"),
    ],
)
def test_each_release_platform_has_its_wheel_tag(platform: str, tag: str) -> None:
    assert hatch_build.wheel_tag(platform) == tag


@pytest.mark.parametrize("platform", ["windows/amd64", "linux/386", "linux", "amd64", ""])
def test_a_platform_without_a_wheel_tag_is_refused_with_those_that_have_one(platform: str) -> None:
    with pytest.raises(ValueError, match="the platforms with wheels are linux/amd64, linux/arm64, darwin/amd64, darwin/arm64"):
        hatch_build.wheel_tag(platform)


def test_without_a_binary_the_wheel_is_pure_and_its_polyop_is_the_fallback_script() -> None:
    data = hatch_build.wheel_build_data({}, str(ROOT))
    assert data == {"shared_scripts": {str(ROOT / "scripts" / "polyop"): "polyop"}}


def test_with_a_binary_the_wheel_is_tagged_for_its_platform_and_carries_it(tmp_path: Path) -> None:
    binary = executable(tmp_path, AARCH64_ELF)
    data = hatch_build.wheel_build_data({"POLYOP_BINARY": binary, "POLYOP_PLATFORM": "linux/arm64"}, str(ROOT))
    assert data == {
        "tag": "py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
        "pure_python": False,
        "shared_scripts": {binary: "polyop"},
    }


def test_a_relative_binary_path_is_taken_from_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = executable(tmp_path, X86_64_ELF)
    monkeypatch.chdir(tmp_path)
    data = hatch_build.wheel_build_data({"POLYOP_BINARY": "polyop", "POLYOP_PLATFORM": "linux/amd64"}, str(ROOT))
    assert data["shared_scripts"] == {binary: "polyop"}


@pytest.mark.parametrize(
    ("environ", "error"),
    [
        ({"POLYOP_PLATFORM": "linux/amd64"}, "POLYOP_PLATFORM=linux/amd64 without POLYOP_BINARY"),
        ({"POLYOP_BINARY": "/bin/true"}, "POLYOP_BINARY without POLYOP_PLATFORM"),
        ({"POLYOP_BINARY": "/bin/true", "POLYOP_PLATFORM": "freebsd/amd64"}, "POLYOP_PLATFORM='freebsd/amd64': no wheel tag"),
    ],
)
def test_an_incomplete_or_unknown_request_is_refused(environ: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        hatch_build.wheel_build_data(environ, str(ROOT))


def test_a_missing_binary_is_refused(tmp_path: Path) -> None:
    missing = str(tmp_path / "polyop-linux-amd64")
    with pytest.raises(FileNotFoundError, match=f"POLYOP_BINARY={missing}: no such file"):
        hatch_build.wheel_build_data({"POLYOP_BINARY": missing, "POLYOP_PLATFORM": "linux/amd64"}, str(ROOT))


@pytest.mark.parametrize(
    ("content", "mode", "platform", "error"),
    [
        (X86_64_ELF, 0o644, "linux/amd64", "not executable"),
        (X86_64_ELF, 0o755, "linux/arm64", "not a 64-bit ELF executable for linux/arm64"),
        (b"#!/bin/sh\n", 0o755, "linux/amd64", "not a 64-bit ELF executable for linux/amd64"),
        (X86_64_ELF, 0o755, "darwin/amd64", "not a 64-bit Mach-O executable for darwin/amd64"),
        (macho(X86_64_MACOS, (12, 0)), 0o755, "darwin/arm64", "not a 64-bit Mach-O executable for darwin/arm64"),
        (macho(ARM64_MACOS, (13, 0)), 0o755, "darwin/arm64", r"needs macOS 13\.0, its wheel's tag py3-none-macosx_12_0_arm64"),
        (macho(X86_64_MACOS, (14, 2), 0x24), 0o755, "darwin/amd64", r"needs macOS 14\.2"),
    ],
)
def test_a_binary_that_would_not_run_where_its_wheel_goes_is_refused(
    tmp_path: Path, content: bytes, mode: int, platform: str, error: str
) -> None:
    binary = executable(tmp_path, content, mode)
    with pytest.raises(ValueError, match=error):
        hatch_build.check_binary(binary, platform)


@pytest.mark.parametrize(
    ("content", "platform"),
    [
        (X86_64_ELF, "linux/amd64"),
        (macho(X86_64_MACOS, (12, 0)), "darwin/amd64"),
        (macho(ARM64_MACOS, (11, 0)), "darwin/arm64"),
        (macho(X86_64_MACOS, (10, 13), 0x24), "darwin/amd64"),
    ],
)
def test_a_binary_for_its_platform_is_accepted(tmp_path: Path, content: bytes, platform: str) -> None:
    hatch_build.check_binary(executable(tmp_path, content), platform)


def build_wheel(directory: Path) -> zipfile.ZipFile:
    """The standard wheel hatchling builds of this package, with the hook, into directory."""
    return zipfile.ZipFile(next(WheelBuilder(str(ROOT)).build(directory=str(directory), versions=["standard"])))


def test_hatchling_builds_a_platform_wheel_whose_polyop_is_the_executable_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = executable(tmp_path, X86_64_ELF)
    monkeypatch.setenv("POLYOP_BINARY", binary)
    monkeypatch.setenv("POLYOP_PLATFORM", "linux/amd64")
    with build_wheel(tmp_path / "dist") as wheel:
        assert Path(wheel.filename or "").name == (
            f"polyop-{__version__}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64.whl"
        )
        assert wheel.read(f"polyop-{__version__}.dist-info/WHEEL").decode().splitlines()[2:] == [
            "Root-Is-Purelib: false",
            "Tag: py3-none-manylinux2014_x86_64",
            "Tag: py3-none-manylinux_2_17_x86_64",
            "Tag: py3-none-musllinux_1_1_x86_64",
        ]
        script = wheel.getinfo(f"polyop-{__version__}.data/scripts/polyop")
        assert wheel.read(script) == X86_64_ELF
        assert stat.S_IMODE(script.external_attr >> 16) == 0o755
        assert "polyop/py.typed" in wheel.namelist()


def test_hatchling_builds_a_pure_wheel_whose_polyop_is_the_fallback_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POLYOP_BINARY", raising=False)
    monkeypatch.delenv("POLYOP_PLATFORM", raising=False)
    with build_wheel(tmp_path / "dist") as wheel:
        assert Path(wheel.filename or "").name == f"polyop-{__version__}-py3-none-any.whl"
        assert "Root-Is-Purelib: true" in wheel.read(f"polyop-{__version__}.dist-info/WHEEL").decode()
        script = wheel.getinfo(f"polyop-{__version__}.data/scripts/polyop")
        # The shebang that pip points at the environment's Python.
        assert wheel.read(script).startswith(b"#!python\n")
        assert stat.S_IMODE(script.external_attr >> 16) == 0o755
