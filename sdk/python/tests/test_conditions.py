from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from polyop import (
    find_condition,
    is_condition_false,
    is_condition_true,
    remove_condition,
    set_condition,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
T1 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def ready(status: str, reason: str = "R", message: str = "", generation: int = 0, at: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    c: dict[str, Any] = {"type": "Ready", "status": status, "lastTransitionTime": at, "reason": reason, "message": message}
    if generation:
        c["observedGeneration"] = generation
    return c


@pytest.mark.parametrize(
    ("before", "args", "want", "changed"),
    [
        pytest.param([], (True, "R"), [ready("True")], True, id="a new condition is added with the time of now"),
        pytest.param([ready("True")], (True, "R"), [ready("True")], False, id="the same condition changes nothing"),
        pytest.param(
            [ready("True")], (False, "R"), [ready("False", at="2026-01-02T03:04:05Z")], True,
            id="a new status moves the transition time",
        ),
        pytest.param(
            [ready("True")], (True, "Other", "msg"), [ready("True", "Other", "msg")], True,
            id="a new reason or message keeps the transition time",
        ),
        pytest.param(
            [ready("Unknown", generation=2)], ("Unknown", "R"), [ready("Unknown")], True,
            id="a zero observed generation removes the field",
        ),
    ],
)
def test_set_condition(before: list[dict[str, Any]], args: tuple[Any, ...], want: list[dict[str, Any]], changed: bool) -> None:
    now = T0 if not before else T1
    assert set_condition(before, "Ready", *args, now=now) is changed
    assert before == want


def test_set_condition_records_the_observed_generation() -> None:
    conds: list[dict[str, Any]] = []
    set_condition(conds, "Ready", True, "R", observed_generation=4, now=T0)
    assert conds == [ready("True", generation=4)]
    assert not set_condition(conds, "Ready", True, "R", observed_generation=4, now=T1)


def test_set_condition_refuses_other_statuses() -> None:
    with pytest.raises(ValueError, match="True, False or 'Unknown'"):
        set_condition([], "Ready", "yes", "R")  # type: ignore[arg-type]


def test_queries_and_remove() -> None:
    conds = [ready("True"), {"type": "Degraded", "status": "False"}]
    assert is_condition_true(conds, "Ready") and not is_condition_false(conds, "Ready")
    assert is_condition_false(conds, "Degraded") and not is_condition_true(conds, "Missing")
    assert find_condition(conds, "Degraded") == {"type": "Degraded", "status": "False"}
    assert remove_condition(conds, "Ready") and not remove_condition(conds, "Ready")
    assert [c["type"] for c in conds] == ["Degraded"]
