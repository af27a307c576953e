"""The polyop command beside the SDK.

A platform wheel of this package carries the polyop binary (the CLI and the host, built from Go), which pip installs
into the environment's scripts directory (a virtualenv's ``bin/``) as the executable itself. The pure wheel, which
pip takes on a platform without a wheel of its own, and a build from the sdist install a ``polyop`` script instead
(``scripts/polyop``), which calls :func:`missing` to say how to get the binary. ``python -m polyop`` runs the binary
when it is installed (:func:`main`).
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from polyop._version import __version__

__all__ = ["find_binary", "main", "missing", "missing_message"]

_NAME = "polyop"


def missing_message(version: str = __version__) -> str:
    """What the polyop command says when the package was installed without the binary."""
    return f"""\
polyop: the polyop binary is not installed. The Python package polyop {version} was installed without it: pip found
no wheel carrying it for this platform ({platform.system()} {platform.machine()}), or built the package from source.
The SDK (import polyop) works all the same. Get polyop {version} one of these ways:
  - on linux/amd64 or linux/arm64 (glibc or musl), or darwin/amd64 or darwin/arm64 (macOS 12 or later), whose
    wheels carry the binary:
      pip install polyop=={version}
  - with Go:
      go install github.com/polyop/polyop/cmd/polyop@v{version}
  - the binary from a release archive:
      https://github.com/polyop/polyop/releases/tag/v{version}
"""


def missing() -> int:
    """The pure wheel's polyop: print how to get the binary on stderr, and return 1, the status to exit with."""
    sys.stderr.write(missing_message())
    return 1


def find_binary() -> Path | None:
    """The polyop binary installed with this package, if any: in the scripts directory of this environment, of the
    user's (``pip install --user``) or beside the package (``pip install --target``). The pure wheel's script is not
    the binary."""
    directories = [
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user")),
        str(Path(__file__).resolve().parent.parent / "bin"),
    ]
    for directory in directories:
        path = Path(directory, _NAME)
        if path.is_file() and os.access(path, os.X_OK):
            with path.open("rb") as f:
                if f.read(2) != b"#!":
                    return path
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m polyop``: run the polyop binary with argv (sys.argv's arguments by default), or say how to get
    it and return 1."""
    binary = find_binary()
    if binary is None:
        return missing()
    args = sys.argv[1:] if argv is None else list(argv)
    os.execv(binary, [str(binary), *args])
