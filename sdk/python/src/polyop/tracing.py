"""The span attribute keys and result values of polyop's traces.

The host's spans and every SDK's carry the same keys (Go:
``sdk/go/tracing``), so that a query or a dashboard reads one reconcile the
same way on both sides of the hop. The SDK sets them on the span of each call
(see the README's Tracing section); use them to find polyop's spans in your
own processors or tests.
"""

from __future__ import annotations

from polyop._tracing import (
    BAGGAGE_RECONCILE_ID,
    CONTROLLER,
    DENIED,
    ERROR,
    KIND,
    NAME,
    NAMESPACE,
    RECONCILE_ID,
    REQUEUE,
    RESULT,
    RETRIES,
    SUCCESS,
    TERMINAL_ERROR,
)

__all__ = [
    "BAGGAGE_RECONCILE_ID",
    "CONTROLLER",
    "DENIED",
    "ERROR",
    "KIND",
    "NAME",
    "NAMESPACE",
    "RECONCILE_ID",
    "REQUEUE",
    "RESULT",
    "RETRIES",
    "SUCCESS",
    "TERMINAL_ERROR",
]
