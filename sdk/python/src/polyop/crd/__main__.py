"""``python -m polyop.crd MODULE... [-o DIR]``: write the CRDs of the kinds the modules declare."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from polyop.crd._crd import build_crds, find_kinds, to_yaml, write_crds
from polyop.crd._models import Resource
from polyop.crd._schema import SchemaError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m polyop.crd",
        description="Write a CustomResourceDefinition for each group and kind declared with @polyop.crd.kind "
        "in the modules: one <group>_<plural>.yaml per CRD in DIR, or all of them to standard output.",
    )
    parser.add_argument("modules", nargs="+", metavar="MODULE", help="a module to import, e.g. widget.api (the current directory is on the path)")
    parser.add_argument("-o", "--output-dir", metavar="DIR", help="the directory to write into (made when missing); standard output by default")
    args = parser.parse_args(argv)
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        kinds: list[type[Resource]] = []
        for module in args.modules:
            kinds.extend(k for k in find_kinds(module) if k not in kinds)
        if not kinds:
            print(f"polyop.crd: {', '.join(args.modules)} declare no kind (@polyop.crd.kind)", file=sys.stderr)
            return 1
        if args.output_dir:
            for path in write_crds(args.modules, args.output_dir):
                print(path)
            return 0
        sys.stdout.write("".join(to_yaml(crd) for crd in build_crds(kinds)))
    except (SchemaError, ValueError, TypeError, ImportError) as err:
        print(f"polyop.crd: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
