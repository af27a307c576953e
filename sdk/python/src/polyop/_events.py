"""Kubernetes events, as a handler records them: type, reason, message, then
the optional action."""

from __future__ import annotations

from typing import Literal, get_args

from polyop.v1alpha1 import reconcile_pb2

__all__ = ["EventType", "event_proto"]

EventType = Literal["Normal", "Warning"]
"""An event's type."""

_EVENT_TYPES = {"Normal": reconcile_pb2.EVENT_TYPE_NORMAL, "Warning": reconcile_pb2.EVENT_TYPE_WARNING}
assert set(_EVENT_TYPES) == set(get_args(EventType))


def event_proto(type: str, reason: str, message: str, action: str) -> reconcile_pb2.Event:
    """The Event of ``Context.event``'s arguments; refuses a type that is neither Normal nor Warning."""
    kind = _EVENT_TYPES.get(type)
    if kind is None:
        raise ValueError(f"event type {type!r}: want 'Normal' or 'Warning' (the arguments are type, reason, message)")
    return reconcile_pb2.Event(type=kind, reason=reason, message=message, action=action)
