"""Kubernetes quantities ("500m", "2", "16Gi", "1e3"), parsed into exact decimals.

The grammar is k8s.io/apimachinery's resource.Quantity: a signed decimal
number followed by a binary suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal suffix
(n, u, m, k, M, G, T, P, E) or a decimal exponent (e3, E-2).
"""

from __future__ import annotations

import re
from decimal import Decimal

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")

_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}


def parse_quantity(value: object) -> Decimal:
    """Return the quantity's value; raises ValueError when value is not a
    quantity. Integers (as in ``pods: 50``) are quantities too."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{value!r} is not a quantity")
    text = str(value)
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a quantity such as 500m, 2 or 16Gi")
    number, suffix = match.group(1), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return Decimal(number).scaleb(int(suffix[1:]))
    return Decimal(number) * _SUFFIXES[suffix]
