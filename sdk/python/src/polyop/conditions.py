"""Status conditions, as k8s.io/apimachinery's meta.SetStatusCondition keeps them.

Every function takes the list of conditions, as JSON dicts (``type``,
``status``, ``reason``, ``message``, ``observedGeneration``,
``lastTransitionTime``); :attr:`polyop.Object.conditions` is
``status.conditions``, created when missing::

    set_condition(obj.conditions, READY, True, "Reconciled", "the tenant is ready",
                  observed_generation=obj.meta.generation)
"""

from __future__ import annotations

import warnings
from datetime import datetime, timezone
from typing import Any, Literal

__all__ = [
    "DEGRADED",
    "READY",
    "ConditionStatus",
    "find_condition",
    "is_condition_false",
    "is_condition_true",
    "is_condition_unknown",
    "mark_condition_false",
    "mark_condition_true",
    "mark_condition_unknown",
    "remove_condition",
    "set_condition",
]

READY = "Ready"
"""True when the object is reconciled and serves its purpose."""

DEGRADED = "Degraded"
"""True when the object is failing, for example because its spec is invalid."""

ConditionStatus = bool | Literal["True", "False", "Unknown"]
"""A condition's status: True, False, or ``"Unknown"``."""

Conditions = list[dict[str, Any]]


def set_condition(
    conditions: Conditions,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    *,
    observed_generation: int = 0,
    now: datetime | None = None,
) -> bool:
    """Add the condition, or update the one of the same type, and report whether
    anything changed.

    ``lastTransitionTime`` is set to now when the condition is added or its
    status changes, and kept otherwise, so that it says when the status last
    changed. ``now`` defaults to the current time.
    """
    status_text = _status(status)
    existing = find_condition(conditions, type)
    if existing is None:
        condition: dict[str, Any] = {
            "type": type,
            "status": status_text,
            "lastTransitionTime": _timestamp(now),
            "reason": reason,
            "message": message,
        }
        if observed_generation:
            condition["observedGeneration"] = observed_generation
        conditions.append(condition)
        return True
    changed = False
    if existing.get("status") != status_text:
        existing["status"] = status_text
        existing["lastTransitionTime"] = _timestamp(now)
        changed = True
    for key, value in (("reason", reason), ("message", message)):
        if existing.get(key, "") != value:
            existing[key] = value
            changed = True
    if existing.get("observedGeneration", 0) != observed_generation:
        if observed_generation:
            existing["observedGeneration"] = observed_generation
        else:
            del existing["observedGeneration"]
        changed = True
    return changed


def find_condition(conditions: Conditions, type: str) -> dict[str, Any] | None:
    """Return the condition of this type, or None."""
    for condition in conditions:
        if condition.get("type") == type:
            return condition
    return None


def mark_condition_true(
    conditions: Conditions, type: str, reason: str, message: str = "", *, observed_generation: int = 0, now: datetime | None = None
) -> bool:
    """:func:`set_condition` with status True; reports whether anything changed."""
    return set_condition(conditions, type, True, reason, message, observed_generation=observed_generation, now=now)


def mark_condition_false(
    conditions: Conditions, type: str, reason: str, message: str = "", *, observed_generation: int = 0, now: datetime | None = None
) -> bool:
    """:func:`set_condition` with status False; reports whether anything changed."""
    return set_condition(conditions, type, False, reason, message, observed_generation=observed_generation, now=now)


def mark_condition_unknown(
    conditions: Conditions, type: str, reason: str, message: str = "", *, observed_generation: int = 0, now: datetime | None = None
) -> bool:
    """:func:`set_condition` with status Unknown; reports whether anything changed."""
    return set_condition(conditions, type, "Unknown", reason, message, observed_generation=observed_generation, now=now)


def is_condition_true(conditions: Conditions, type: str) -> bool:
    """Whether the condition is present and True."""
    return _has_status(conditions, type, "True")


def is_condition_false(conditions: Conditions, type: str) -> bool:
    """Whether the condition is present and False."""
    return _has_status(conditions, type, "False")


def is_condition_unknown(conditions: Conditions, type: str) -> bool:
    """Whether the condition is present and Unknown."""
    return _has_status(conditions, type, "Unknown")


def is_true(conditions: Conditions, type: str) -> bool:
    """Deprecated: use :func:`is_condition_true`."""
    warnings.warn("polyop.is_true is deprecated: use polyop.is_condition_true", DeprecationWarning, stacklevel=2)
    return is_condition_true(conditions, type)


def is_false(conditions: Conditions, type: str) -> bool:
    """Deprecated: use :func:`is_condition_false`."""
    warnings.warn("polyop.is_false is deprecated: use polyop.is_condition_false", DeprecationWarning, stacklevel=2)
    return is_condition_false(conditions, type)


def _has_status(conditions: Conditions, type: str, status: str) -> bool:
    condition = find_condition(conditions, type)
    return condition is not None and condition.get("status") == status


def remove_condition(conditions: Conditions, type: str) -> bool:
    """Remove the condition of this type and report whether it was present."""
    for i, condition in enumerate(conditions):
        if condition.get("type") == type:
            del conditions[i]
            return True
    return False


def _status(status: ConditionStatus) -> str:
    if status is True:
        return "True"
    if status is False:
        return "False"
    if status in ("True", "False", "Unknown"):
        return status
    raise ValueError(f"a condition's status is True, False or 'Unknown', not {status!r}")


def _timestamp(now: datetime | None) -> str:
    # metav1.Time's JSON form: RFC 3339 in UTC, to the second.
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
