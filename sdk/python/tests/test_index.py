"""Declared indexes and cached kinds: what Describe carries, and a
FakeCluster that answers Lists by them as the host's cache does."""

from __future__ import annotations

from typing import Any

import pytest

import polyop
from polyop._fieldpath import compile_path
from polyop.testing import FakeCluster, Harness
from polyop.v1alpha1 import describe_pb2, types_pb2

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-1",
        "namespace": "shop",
        "labels": {"app.kubernetes.io/name": "web"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u1", "controller": True},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "uid": "u2"},
        ],
    },
    "spec": {
        "nodeName": "node-a",
        "priority": 7,
        "containers": [{"name": "app", "image": "web:1"}, {"name": "proxy", "image": "envoy:2"}, {"name": "again", "image": "web:1"}],
    },
}


@pytest.mark.parametrize(
    ("path", "want"),
    [
        (".spec.nodeName", ["node-a"]),
        ("spec.nodeName", ["node-a"]),
        (".spec.priority", ["7"]),
        (".metadata.labels['app.kubernetes.io/name']", ["web"]),
        (".spec.containers[*].image", ["web:1", "envoy:2"]),
        (".spec.containers[1].name", ["proxy"]),
        (".metadata.ownerReferences[?(@.controller==true)].name", ["web-abc"]),
        (".metadata.ownerReferences[?(@.kind=='ConfigMap')].uid", ["u2"]),
        (".spec.missing", []),
    ],
)
def test_a_field_path_gives_what_the_host_gives(path: str, want: list[str]) -> None:
    assert compile_path(path)(POD) == want


@pytest.mark.parametrize("path", ["", ".spec.", ".a..b", ".a[-1]", ".metadata.labels.app.kubernetes.io/name", ".a[?(@.b!=1)]"])
def test_a_bad_field_path_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="field path"):
        compile_path(path)


def sidecar() -> polyop.Sidecar:
    s = polyop.Sidecar("pods")
    s.index("v1/Pod", ".metadata.controller", field_path=".metadata.ownerReferences[?(@.controller==true)].name")
    s.index("v1/Pod", "images", cel="object.spec.containers.map(c, c.image)")
    s.cache_kind("v1/Pod", namespaces=["shop"], label_selector="app=web", field_selector="status.phase=Running")

    @s.reconciler("apps/v1/ReplicaSet")
    def reconcile(rs: polyop.Object, ctx: polyop.Context) -> polyop.Result:
        pods = ctx.cluster.list("v1/Pod", namespace=rs.namespace, field_selector=f".metadata.controller={rs.name}")
        rs.status["pods"] = [p.name for p in pods.items]
        return polyop.Result()

    return s


def test_describe_carries_the_indexes_and_cached_kinds() -> None:
    got = Harness(sidecar()).describe()
    pod = types_pb2.GroupVersionKind(version="v1", kind="Pod")
    assert list(got.indexes) == [
        describe_pb2.IndexDescription(
            kind=pod, name=".metadata.controller", field_path=".metadata.ownerReferences[?(@.controller==true)].name"
        ),
        describe_pb2.IndexDescription(kind=pod, name="images", cel="object.spec.containers.map(c, c.image)"),
    ]
    assert list(got.cached_kinds) == [
        describe_pb2.CachedKind(kind=pod, namespaces=["shop"], label_selector="app=web", field_selector="status.phase=Running")
    ]


@pytest.mark.parametrize(
    ("declare", "match"),
    [
        (lambda s: s.index("v1/Pod", "x", field_path=".a", cel="'a'"), "one of them"),
        (lambda s: s.index("v1/Pod", "x"), "one of them"),
        (lambda s: s.index("v1/Pod", "a=b", field_path=".a"), "without '='"),
        (lambda s: s.index("v1/Pod", polyop.OWNER_UID_INDEX, field_path=".a"), "keeps this index itself"),
        (lambda s: s.index("v1/Pod", "x", field_path=".a..b"), "field path"),
        (lambda s: (s.index("v1/Pod", "x", field_path=".a"), s.index("v1/Pod", "x", field_path=".b")), "already declared"),
        (lambda s: (s.cache_kind("v1/Pod"), s.cache_kind("v1/Pod")), "already declared"),
        (lambda s: s.cache_kind("v1/Pod", namespaces=["A_b"]), "not a valid name"),
    ],
)
def test_a_bad_declaration_is_refused(declare: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        declare(polyop.Sidecar("pods"))


def test_a_reconcile_lists_by_a_declared_index_from_a_fake_cluster() -> None:
    mine = dict(POD)
    other = {**POD, "metadata": {**POD["metadata"], "name": "web-2", "ownerReferences": [{"name": "other-rs", "uid": "u3", "controller": True}]}}
    fake = FakeCluster([mine, other])
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-abc", "namespace": "shop"}}
    got = Harness(sidecar(), cluster=fake).reconcile(rs)
    assert got.error == ""
    assert got.status == {"pods": ["web-1"]}


def test_a_fake_cluster_lists_by_the_owner_uid_index() -> None:
    fake = FakeCluster([POD])
    assert [p.name for p in fake.list("v1/Pod", namespace="shop", field_selector=f"{polyop.OWNER_UID_INDEX}=u1").items] == ["web-1"]
    assert list(fake.list("v1/Pod", namespace="shop", field_selector=f"{polyop.OWNER_UID_INDEX}=u2").items) == []


def test_a_fake_cluster_lists_by_a_cel_index_only_as_a_function() -> None:
    fake = FakeCluster([POD])
    Harness(sidecar(), cluster=fake)
    with pytest.raises(polyop.BadRequestError, match=r"does not evaluate the CEL of index 'images' on Pod.*fake.index\('v1/Pod', 'images'"):
        fake.list("v1/Pod", field_selector="images=web:1")
    fake.index("v1/Pod", "images", lambda o: [c["image"] for c in o["spec"]["containers"]])
    assert [p.name for p in fake.list("v1/Pod", field_selector="images=envoy:2").items] == ["web-1"]
