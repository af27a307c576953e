"""A reconciler registered with a polyop.crd kind receives the typed object,
and its status is what the host writes."""

from __future__ import annotations

from typing import Any

from pydantic import Field

import polyop
from polyop import crd
from polyop.testing import Harness


class GadgetSpec(crd.Model):
    replicas: int = 1


class GadgetStatus(crd.StatusBase):
    ready_replicas: int = 0


@crd.kind(group="example.com", version="v1")
class Gadget(crd.Resource):
    spec: GadgetSpec = Field(default_factory=GadgetSpec)
    status: GadgetStatus = Field(default_factory=GadgetStatus)


def gadget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": "ns", "generation": 4},
        "spec": spec,
    }


def test_a_typed_reconciler_gets_the_model_and_its_status_is_written() -> None:
    sidecar = polyop.Sidecar("gadgets")
    seen: list[Gadget] = []

    @sidecar.reconciler(kind=Gadget, finalizer="example.com/cleanup")
    def reconcile(g: Gadget, ctx: polyop.Context) -> polyop.Result:
        seen.append(g)
        g.status.ready_replicas = g.spec.replicas
        g.status.observed_generation = g.metadata.generation
        return polyop.Result(requeue_after=30)

    @sidecar.finalizer(Gadget)
    def finalize(g: Gadget, ctx: polyop.Context) -> None:
        seen.append(g)

    harness = Harness(sidecar)
    assert harness.describe().controllers[0].name == "gadget"
    got = harness.reconcile(gadget(replicas=3))
    assert not got.error
    assert isinstance(seen[0], Gadget)
    assert got.status == {"conditions": [], "observedGeneration": 4, "readyReplicas": 3}
    assert got.requeue_after == 30
    assert not harness.finalize(gadget()).error
    assert isinstance(seen[1], Gadget)


def test_an_async_typed_reconciler() -> None:
    sidecar = polyop.Sidecar("gadgets")

    @sidecar.reconciler(Gadget)
    async def reconcile(g: Gadget, ctx: polyop.AsyncContext) -> None:
        g.status.set_condition(polyop.READY, True, "Running", observed_generation=g.metadata.generation or 0)

    got = Harness(sidecar).reconcile(gadget())
    assert got.status is not None
    assert got.status["conditions"][0]["type"] == "Ready"


def test_the_status_is_written_when_the_reconciler_fails() -> None:
    sidecar = polyop.Sidecar("gadgets")

    @sidecar.reconciler(Gadget)
    def reconcile(g: Gadget, ctx: polyop.Context) -> None:
        g.status.set_condition(polyop.READY, False, "Failing", "the backend is down")
        raise polyop.TemporaryError("the backend is down", retry_after=5)

    got = Harness(sidecar).reconcile(gadget())
    assert got.error == "the backend is down"
    assert got.status is not None
    assert got.status["conditions"][0]["reason"] == "Failing"


def test_an_object_that_does_not_fit_the_model_is_a_terminal_error_naming_the_field() -> None:
    sidecar = polyop.Sidecar("gadgets")
    called: list[Gadget] = []

    @sidecar.reconciler(Gadget)
    def reconcile(g: Gadget, ctx: polyop.Context) -> None:
        called.append(g)

    got = Harness(sidecar).reconcile(gadget(replicas="many"))
    assert got.terminal
    assert "the object does not fit Gadget: spec.replicas: Input should be a valid integer" in got.error
    assert called == []
