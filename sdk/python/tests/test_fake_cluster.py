"""FakeCluster: the in-memory cluster of polyop.testing, and the Harness that
hands it to the functions as ctx.cluster."""

from __future__ import annotations

from typing import Any

import pytest

import polyop
from polyop import PatchType
from polyop.testing import FakeCluster, Harness, RecordedEvent

WIDGET = "example.com/v1/Widget"


def cm(name: str, namespace: str = "ns", labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "data": data}


def widget(name: str = "w1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def test_create_stamps_what_the_api_server_would_and_get_reads_it_back() -> None:
    fake = FakeCluster()
    created = fake.create(widget(size=1))
    meta = created.meta
    assert meta.uid and meta.resource_version and meta.creation_timestamp and meta.generation == 1
    assert fake.get(WIDGET, "w1", "ns") == created
    with pytest.raises(polyop.AlreadyExistsError, match='widgets.example.com "w1" already exists'):
        fake.create(widget(size=2))
    generated = fake.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "cfg-", "namespace": "ns"}})
    assert generated.name.startswith("cfg-") and len(generated.name) > len("cfg-")
    with pytest.raises(polyop.BadRequestError, match="namespaced"):
        fake.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nowhere"}})
    assert fake.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}).namespace == ""


def test_a_missing_object_is_not_found_with_the_api_servers_message() -> None:
    fake = FakeCluster()
    with pytest.raises(polyop.NotFoundError) as err:
        fake.get("v1/ConfigMap", "nope", "ns")
    assert (err.value.message, err.value.http_code, err.value.reason) == ('configmaps "nope" not found', 404, "NotFound")
    assert isinstance(err.value, polyop.ClusterError)
    with polyop.ignore_not_found():
        fake.delete("v1/ConfigMap", "nope", "ns")


def test_list_selects_by_namespace_labels_and_fields() -> None:
    fake = FakeCluster([
        cm("a", labels={"app": "web", "tier": "front"}),
        cm("b", labels={"app": "db"}),
        cm("c", labels={"app": "web"}),
        cm("d", namespace="other", labels={"app": "web"}),
    ])

    def names(namespace: str = "", **kwargs: Any) -> list[str]:
        return [o.name for o in fake.list("v1/ConfigMap", namespace, **kwargs).items]

    assert names() == ["a", "b", "c", "d"]
    assert names("ns") == ["a", "b", "c"]
    assert names("ns", label_selector="app=web") == ["a", "c"]
    assert names("ns", label_selector="app==web,tier") == ["a"]
    assert names("ns", label_selector="app!=web") == ["b"]
    assert names("ns", label_selector="!tier") == ["b", "c"]
    assert names(label_selector="app in (db, web),tier notin (front)") == ["b", "c", "d"]
    assert names(field_selector="metadata.name=c") == ["c"]
    assert names(field_selector="metadata.namespace!=ns") == ["d"]
    with pytest.raises(polyop.BadRequestError):
        names(label_selector="app=(")
    with pytest.raises(polyop.BadRequestError, match="metadata.name and metadata.namespace"):
        names(field_selector="status.phase=Running")

    first = fake.list("v1/ConfigMap", limit=3)
    assert [o.name for o in first.items] == ["a", "b", "c"] and first.continue_token
    rest = fake.list("v1/ConfigMap", limit=3, continue_token=first.continue_token)
    assert [o.name for o in rest.items] == ["d"] and rest.continue_token == ""


def test_update_has_optimistic_concurrency_and_keeps_the_status_apart() -> None:
    fake = FakeCluster()
    stored = fake.create(widget(size=1))
    stored["status"] = {"phase": "Ignored"}
    stored.spec["size"] = 2
    updated = fake.update(stored)
    assert updated.spec == {"size": 2} and "status" not in updated and updated.meta.generation == 2
    assert updated.meta.resource_version != stored.meta.resource_version

    with pytest.raises(polyop.ConflictError, match="the object has been modified"):
        fake.update(stored)  # its resourceVersion is stale now

    updated.status["phase"] = "Ready"
    with_status = fake.update(updated, subresource="status")
    assert with_status.status == {"phase": "Ready"} and with_status.meta.generation == 2
    with_status.spec["size"] = 3
    assert fake.update(with_status, subresource="status").spec == {"size": 2}  # the status subresource changes the status only


def test_merge_json_and_apply_patches() -> None:
    fake = FakeCluster([cm("c1", a="1", b="2")])
    merged = fake.patch("v1/ConfigMap", "c1", {"data": {"a": None, "c": "3"}, "metadata": {"labels": {"x": "y"}}}, "ns")
    assert merged["data"] == {"b": "2", "c": "3"} and merged.meta.labels == {"x": "y"}

    ops = [{"op": "test", "path": "/data/b", "value": "2"}, {"op": "replace", "path": "/data/b", "value": "two"},
           {"op": "add", "path": "/data/d~1e", "value": "4"}, {"op": "remove", "path": "/data/c"}]
    patched = fake.patch("v1/ConfigMap", "c1", ops, "ns", type=PatchType.JSON)
    assert patched["data"] == {"b": "two", "d/e": "4"}
    with pytest.raises(polyop.BadRequestError, match="test"):
        fake.patch("v1/ConfigMap", "c1", [{"op": "test", "path": "/data/b", "value": "2"}], "ns", type=PatchType.JSON)
    with pytest.raises(polyop.BadRequestError, match="STRATEGIC_MERGE"):
        fake.patch("v1/ConfigMap", "c1", {"data": {}}, "ns", type=PatchType.STRATEGIC_MERGE)
    with pytest.raises(polyop.ConflictError):
        fake.patch("v1/ConfigMap", "c1", {"metadata": {"resourceVersion": "1"}}, "ns")

    applied = fake.apply(cm("c2", z="26"), field_manager="me")
    assert applied["data"] == {"z": "26"}
    assert fake.apply({**cm("c2"), "data": {"y": "25"}}, force=True)["data"] == {"z": "26", "y": "25"}
    with pytest.raises(ValueError, match="server-side apply only"):
        fake.patch("v1/ConfigMap", "c1", {}, "ns", force=True)


def test_dry_runs_store_nothing() -> None:
    fake = FakeCluster([cm("c1", a="1")])
    fake.create(cm("c2"), dry_run=True)
    fake.patch("v1/ConfigMap", "c1", {"data": {"a": "2"}}, "ns", dry_run=True)
    fake.delete("v1/ConfigMap", "c1", "ns", dry_run=True)
    assert [(o.name, o["data"]) for o in fake.list("v1/ConfigMap").items] == [("c1", {"a": "1"})]


def test_delete_waits_for_finalizers_and_checks_preconditions() -> None:
    fake = FakeCluster([{**widget(), "metadata": {"name": "w1", "namespace": "ns", "finalizers": ["example.com/cleanup"]}}])
    stored = fake.get(WIDGET, "w1", "ns")
    with pytest.raises(polyop.ConflictError, match="Precondition failed: UID"):
        fake.delete(WIDGET, "w1", "ns", precondition_uid="someone-else")
    fake.delete(WIDGET, "w1", "ns", precondition_uid=stored.meta.uid)
    deleting = fake.get(WIDGET, "w1", "ns")
    assert deleting.meta.deletion_timestamp is not None
    deleting.metadata["finalizers"] = []
    fake.update(deleting)
    with pytest.raises(polyop.NotFoundError):
        fake.get(WIDGET, "w1", "ns")


def test_events_are_recorded() -> None:
    fake = FakeCluster([cm("c1")])
    fake.record_event("v1/ConfigMap", "c1", "ns", type="Warning", reason="Touched", message="by a test", action="Touching")
    assert fake.events == [RecordedEvent(polyop.GVK("", "v1", "ConfigMap"), "ns", "c1", "Warning", "Touched", "by a test", "Touching")]
    with pytest.raises(ValueError, match="want 'Normal' or 'Warning'"):
        fake.record_event("v1/ConfigMap", "c1", "ns", type="Touched", reason="by", message="a test")  # type: ignore[arg-type]
    assert fake.resolve_kind("v1/ConfigMap") == polyop.ResolvedKind(polyop.GVK("", "v1", "ConfigMap"), "configmaps", True)
    assert not fake.resolve_kind("v1/Namespace").namespaced


def reconciling_sidecar() -> polyop.Sidecar:
    """A reconciler that reads a Secret and writes a ConfigMap through ctx.cluster."""
    sidecar = polyop.Sidecar("w")

    @sidecar.reconciler(WIDGET)
    def reconcile(obj: polyop.Object, ctx: polyop.Context) -> None:
        try:
            secret = ctx.cluster.get("v1/Secret", obj.name, obj.namespace)
        except polyop.NotFoundError:
            obj.status["phase"] = "WaitingForSecret"
            return
        config = cm(f"{obj.name}-config", obj.namespace, owner=secret["data"]["owner"])
        try:
            ctx.cluster.create(config)
        except polyop.AlreadyExistsError:
            ctx.cluster.patch("v1/ConfigMap", config["metadata"]["name"], {"data": config["data"]}, obj.namespace)
        ctx.cluster.record_event(WIDGET, obj.name, obj.namespace, type="Normal", reason="Configured", message="wrote the config")
        obj.status["phase"] = "Ready"

    return sidecar


def test_a_reconciler_that_calls_the_cluster_is_unit_tested_against_the_fake() -> None:
    fake = FakeCluster()
    h = Harness(reconciling_sidecar(), cluster=fake)
    assert h.reconcile(widget()).status == {"phase": "WaitingForSecret"}

    fake.add({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "w1", "namespace": "ns"}, "data": {"owner": "alice"}})
    assert h.reconcile(widget()).status == {"phase": "Ready"}
    assert fake.get("v1/ConfigMap", "w1-config", "ns")["data"] == {"owner": "alice"}
    assert h.reconcile(widget()).error == ""  # the second time it patches
    assert [e.reason for e in fake.events] == ["Configured", "Configured"]
