from __future__ import annotations

import os
import socket

import pytest

from polyop._address import Address, parse_address, prepare_socket


@pytest.mark.parametrize(
    ("address", "want"),
    [
        pytest.param("unix:///var/run/polyop/sidecar.sock", Address(unix_path="/var/run/polyop/sidecar.sock"), id="unix with an absolute path"),
        pytest.param("unix:rel/s.sock", Address(unix_path=os.path.join(os.getcwd(), "rel/s.sock")), id="unix with a relative path, made absolute"),
        pytest.param("tcp://127.0.0.1:9443", Address(host="127.0.0.1", port=9443), id="tcp with a scheme"),
        pytest.param("localhost:9443", Address(host="localhost", port=9443), id="tcp without a scheme"),
        pytest.param("[::1]:0", Address(host="::1", port=0), id="an IPv6 host"),
    ],
)
def test_parse_address(address: str, want: Address) -> None:
    assert parse_address(address) == want


@pytest.mark.parametrize(
    ("address", "match"),
    [
        pytest.param("", "empty", id="an empty address"),
        pytest.param("unix://rel.sock", "absolute path", id="unix:// with a relative path"),
        pytest.param("unix:", "no socket path", id="unix without a path"),
        pytest.param("http://h:1", "unix or tcp", id="another scheme"),
        pytest.param("localhost", "neither", id="a host without a port"),
    ],
)
def test_parse_address_refuses(address: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_address(address)


def test_a_relative_socket_is_resolved_against_the_working_directory(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(str(tmp_path))
    address = parse_address("unix:run/../cluster.sock")
    assert address.unix_path == os.path.join(os.getcwd(), "cluster.sock")
    assert address.grpc_target == "unix:" + os.path.join(os.getcwd(), "cluster.sock")


def test_grpc_targets() -> None:
    assert parse_address("unix:///a/b.sock").grpc_target == "unix:/a/b.sock"
    assert parse_address("tcp://[::1]:80").grpc_target == "[::1]:80"


def test_prepare_socket_creates_the_directory_and_removes_a_stale_socket(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "sub", "s.sock")
    prepare_socket(path)
    assert os.path.isdir(os.path.dirname(path))
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()  # bound, never listened: nobody serves on it
    prepare_socket(path)
    assert not os.path.exists(path)


def test_prepare_socket_refuses_a_file_that_is_not_a_socket(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "s.sock")
    open(path, "w").close()
    with pytest.raises(OSError, match="not a socket"):
        prepare_socket(path)
    assert os.path.exists(path)


def test_prepare_socket_refuses_a_socket_in_use(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "s.sock")
    live = socket.socket(socket.AF_UNIX)
    live.bind(path)
    live.listen()
    try:
        with pytest.raises(OSError, match="another process is serving"):
            prepare_socket(path)
    finally:
        live.close()
