from __future__ import annotations

from decimal import Decimal

import pytest

from tenant.quantity import parse_quantity


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2", Decimal(2)),
        (50, Decimal(50)),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("16Gi", Decimal(16 * 1024**3)),
        ("1k", Decimal(1000)),
        ("1e3", Decimal(1000)),
        ("25E-1", Decimal("2.5")),
        ("-1", Decimal(-1)),
        ("0", Decimal(0)),
        ("+3M", Decimal(3_000_000)),
    ],
)
def test_parse_quantity(text: str | int, want: Decimal) -> None:
    assert parse_quantity(text) == want


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "5gi", "Gi", "1KiB", True, 1.5, None])
def test_parse_quantity_refuses(text: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)
