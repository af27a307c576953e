"""The wheel's build hook (hatchling): the polyop binary, or a script that says how to get it.

A release builds one wheel per platform, each carrying the polyop binary (the CLI and the host, built from Go) as
``polyop-<version>.data/scripts/polyop``, which pip installs into the environment's scripts directory (a virtualenv's
``bin/``) as the executable itself, as ruff and uv ship theirs. Two environment variables ask for it (hatchling passes
no config settings to its hooks)::

    POLYOP_BINARY=dist/bin/polyop-linux-amd64 POLYOP_PLATFORM=linux/amd64 python -m build --wheel sdk/python

``POLYOP_PLATFORM`` is the binary's GOOS/GOARCH, which :data:`PLATFORM_TAGS` turns into the wheel's tag. Without
``POLYOP_BINARY`` the wheel is pure (``py3-none-any``), for every platform without a wheel of its own and for builds
from the sdist: its ``polyop`` is ``scripts/polyop``, which says how to get the binary and exits 1. The editable
install of development carries neither.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Mapping
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BINARY_ENV = "POLYOP_BINARY"
PLATFORM_ENV = "POLYOP_PLATFORM"

FALLBACK_SCRIPT = "scripts/polyop"
"""The pure wheel's polyop, relative to this directory."""

PYTHON_TAG = "py3-none"
"""The binary serves every Python 3 and loads no Python ABI."""

PLATFORM_TAGS = {
    # The binary is static (CGO_ENABLED=0): it needs no C library at all, so one wheel serves glibc
    # (manylinux2014, whose kernel is above Go's minimum, 3.2) and musl (musllinux_1_1, the oldest tag there is).
    "linux/amd64": "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
    "linux/arm64": "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
    # Go 1.25 and later build for macOS 12 or later: the binary's own minimum (LC_BUILD_VERSION), checked below.
    "darwin/amd64": "macosx_12_0_x86_64",
    "darwin/arm64": "macosx_12_0_arm64",
}
"""The wheel platform tag of each GOOS/GOARCH a release builds (the Makefile's PLATFORMS)."""

# The machine each platform's executable declares: ELF's e_machine, Mach-O's cputype.
_ELF_MACHINES = {"amd64": 62, "arm64": 183}  # EM_X86_64, EM_AARCH64
_MACHO_CPUS = {"amd64": 0x01000007, "arm64": 0x0100000C}  # CPU_TYPE_X86_64, CPU_TYPE_ARM64
_MACHO_MAGIC_64 = 0xFEEDFACF
_LC_BUILD_VERSION = 0x32
_LC_VERSION_MIN_MACOSX = 0x24


def wheel_tag(platform: str) -> str:
    """The tag of the wheel that carries the binary of platform (GOOS/GOARCH)."""
    if platform not in PLATFORM_TAGS:
        raise ValueError(
            f"{PLATFORM_ENV}={platform!r}: no wheel tag for it; the platforms with wheels are {', '.join(PLATFORM_TAGS)}"
        )
    return f"{PYTHON_TAG}-{PLATFORM_TAGS[platform]}"


def check_binary(path: str, platform: str) -> None:
    """Refuse a binary that is missing, not executable, or not an executable of platform (GOOS/GOARCH), and a macOS
    binary whose minimum version is above its wheel's tag: no wheel installs a polyop that cannot run where it goes."""
    tag = wheel_tag(platform)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{BINARY_ENV}={path}: no such file (make release-binaries builds dist/bin/polyop-<os>-<arch>)")
    if not os.stat(path).st_mode & stat.S_IXUSR:
        raise ValueError(f"{BINARY_ENV}={path}: not executable")
    goos, goarch = platform.split("/")
    with open(path, "rb") as f:
        header = f.read(32)
        if goos == "linux":
            # e_ident: the magic, 64-bit (2), little-endian (1); e_machine at 18.
            machine = struct.unpack_from("<H", header, 18)[0] if len(header) >= 20 else None
            if header[:6] != b"\x7fELF\x02\x01" or machine != _ELF_MACHINES[goarch]:
                raise ValueError(f"{BINARY_ENV}={path}: not a 64-bit ELF executable for {platform}")
            return
        # mach_header_64: magic, cputype, cpusubtype, filetype, ncmds, sizeofcmds, flags, reserved.
        if len(header) < 32 or struct.unpack_from("<Ii", header) != (_MACHO_MAGIC_64, _MACHO_CPUS[goarch]):
            raise ValueError(f"{BINARY_ENV}={path}: not a 64-bit Mach-O executable for {platform}")
        ncmds, sizeofcmds = struct.unpack_from("<II", header, 16)
        minimum = _macos_minimum(f.read(sizeofcmds), ncmds)
    tagged = tuple(int(part) for part in PLATFORM_TAGS[platform].split("_")[1:3])  # macosx_12_0_arm64: (12, 0)
    if minimum is not None and minimum > tagged:
        raise ValueError(
            f"{BINARY_ENV}={path}: the binary needs macOS {minimum[0]}.{minimum[1]}, its wheel's tag {tag} an older one: "
            f"raise PLATFORM_TAGS[{platform!r}] in hatch_build.py"
        )


def _macos_minimum(commands: bytes, ncmds: int) -> tuple[int, int] | None:
    """The minimum macOS version (major, minor) Mach-O load commands declare, if any."""
    offset = 0
    for _ in range(ncmds):
        cmd, cmdsize = struct.unpack_from("<II", commands, offset)
        if cmd in (_LC_BUILD_VERSION, _LC_VERSION_MIN_MACOSX):
            # X.Y.Z as xxxx.yy.zz: after the platform in LC_BUILD_VERSION, first in LC_VERSION_MIN_MACOSX.
            (version,) = struct.unpack_from("<I", commands, offset + (12 if cmd == _LC_BUILD_VERSION else 8))
            return version >> 16, (version >> 8) & 0xFF
        offset += cmdsize
    return None


def wheel_build_data(environ: Mapping[str, str], root: str) -> dict[str, Any]:
    """What a standard wheel's build data takes from the environment: the tag and the binary as the polyop script, or
    the fallback script."""
    binary, platform = environ.get(BINARY_ENV, ""), environ.get(PLATFORM_ENV, "")
    if not binary:
        if platform:
            raise ValueError(f"{PLATFORM_ENV}={platform} without {BINARY_ENV}: set both, or neither for the pure wheel")
        return {"shared_scripts": {os.path.join(root, FALLBACK_SCRIPT): "polyop"}}
    if not platform:
        raise ValueError(f"{BINARY_ENV} without {PLATFORM_ENV}: say the binary's GOOS/GOARCH, e.g. {PLATFORM_ENV}=linux/amd64")
    binary = os.path.abspath(binary)
    check_binary(binary, platform)
    return {"tag": wheel_tag(platform), "pure_python": False, "shared_scripts": {binary: "polyop"}}


class PolyopBuildHook(BuildHookInterface[BuilderConfig]):
    """The wheel target's hook (pyproject.toml): adds the polyop binary of POLYOP_BINARY to a standard wheel, tagged
    for POLYOP_PLATFORM, or the fallback script; an editable install gets neither (development runs bin/polyop, which
    make builds)."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "standard":
            return
        data = wheel_build_data(os.environ, self.root)
        build_data["shared_scripts"].update(data.pop("shared_scripts"))
        build_data.update(data)
