"""Deprecated: the running sidecar is :class:`polyop.RunningSidecar` (and
:class:`polyop.AsyncRunningSidecar`); ``Server`` and ``AsyncServer`` are its
old names."""

from __future__ import annotations

import warnings
from typing import Any

from polyop._serving import AsyncRunningSidecar, RunningSidecar

_RENAMED = {"Server": RunningSidecar, "AsyncServer": AsyncRunningSidecar}


def __getattr__(name: str) -> Any:
    renamed = _RENAMED.get(name)
    if renamed is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"polyop.{name} is deprecated: use polyop.{renamed.__name__}", DeprecationWarning, stacklevel=2)
    return renamed
