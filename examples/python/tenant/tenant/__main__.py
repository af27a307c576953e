"""Run the Tenant operator's sidecar: python -m tenant [--address ADDRESS]."""

from __future__ import annotations

import argparse
import logging

import polyop

from tenant.operator import sidecar


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tenant", description="The Tenant operator's polyop sidecar.")
    parser.add_argument(
        "--address",
        default=polyop.DEFAULT_ADDRESS,
        help="where to serve: unix:///abs.sock, unix:rel.sock, tcp://host:port or host:port (default: %(default)s)",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    sidecar.serve(address=args.address)


if __name__ == "__main__":
    main()
