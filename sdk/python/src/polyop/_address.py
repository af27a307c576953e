"""Addresses in the forms the host's flags take, for serving and dialing.

    unix:///var/run/polyop/sidecar.sock   a unix socket at an absolute path
    unix:sidecar.sock                     a unix socket at a path relative to the working directory
    tcp://127.0.0.1:9443                  a TCP address
    127.0.0.1:9443                        a TCP address

A relative socket path is made absolute when the address is parsed, against
the working directory of this process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from dataclasses import dataclass

DEFAULT_SIDECAR_ADDRESS = "unix:///var/run/polyop/sidecar.sock"


@dataclass(frozen=True)
class Address:
    """A parsed address: a unix socket path, or a TCP host and port."""

    unix_path: str = ""
    host: str = ""
    port: int = 0

    @property
    def grpc_target(self) -> str:
        """The address as gRPC's server and channel take it."""
        if self.unix_path:
            return "unix:" + self.unix_path
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(address: str) -> Address:
    """Parse an address; raises ValueError, saying which forms are accepted.
    A unix socket's path is made absolute, against the working directory."""
    if not address:
        raise ValueError("the address is empty")
    if address.startswith("unix://"):
        path = address[len("unix://"):]
        if not path.startswith("/"):
            raise ValueError(
                f"address {address!r}: unix:// takes an absolute path (unix:///path/to.sock); use unix:{path} for a relative one"
            )
        return Address(unix_path=path)
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        if not path:
            raise ValueError(f"address {address!r} has no socket path")
        return Address(unix_path=os.path.abspath(path))
    if address.startswith("tcp://"):
        address = address[len("tcp://"):]
    elif "://" in address:
        raise ValueError(f"address {address!r}: the scheme must be unix or tcp")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {address!r} is neither unix:PATH nor [tcp://]HOST:PORT")
    return Address(host=host.strip("[]"), port=int(port))


def prepare_socket(path: str) -> None:
    """Create the socket's directory and remove a stale socket left by a
    process that is gone. Refuses to remove anything else: a file that is not
    a socket, or a socket another process still serves on."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(errno.EEXIST, f"{path} exists and is not a socket; refusing to remove it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        pass
    else:
        raise OSError(errno.EADDRINUSE, f"another process is serving on {path}")
    finally:
        probe.close()
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
