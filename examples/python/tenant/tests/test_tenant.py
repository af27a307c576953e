"""The Tenant reconciler and validator, called in-process as the host calls them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from lightkube.resources.core_v1 import ConfigMap, LimitRange, ResourceQuota

from polyop import FieldErrorType
from polyop.testing import FakeCluster, Harness

from tenant import sidecar
from tenant.api import Tenant
from tenant.operator import TENANT_INDEX, config_map, limit_range, resource_quota


def tenant(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"owner": "payments@example.com", "quota": {"cpu": "8", "memory": "16Gi", "pods": 50}}
    base.update(spec)
    return {
        "apiVersion": "examples.polyop.dev/v1",
        "kind": "Tenant",
        "metadata": {"name": "payments", "namespace": "team-payments", "generation": 3, "uid": "u-1"},
        "spec": base,
    }


def reconciling(*objects: dict[str, Any]) -> Harness:
    """A Harness whose functions read objects through ctx.cluster, indexed as
    the sidecar declares."""
    return Harness(sidecar, cluster=FakeCluster(objects))


def quota(name: str, owner: dict[str, Any] | None, **used: str) -> dict[str, Any]:
    """A ResourceQuota in the tenant's namespace, owned by owner, using used."""
    metadata: dict[str, Any] = {"name": name, "namespace": "team-payments"}
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": metadata, "status": {"used": used}}


def test_the_description_declares_the_controller_the_index_and_the_validator() -> None:
    desc = Harness(sidecar).describe()
    (controller,) = desc.controllers
    assert controller.name == "tenant"
    assert [o.kind.kind for o in controller.owns] == ["ResourceQuota", "LimitRange", "ConfigMap"]
    (index,) = desc.indexes
    assert (index.kind.kind, index.name, index.field_path) == ("ResourceQuota", TENANT_INDEX, '.metadata.ownerReferences[?(@.kind=="Tenant")].name')
    ((webhook),) = desc.webhooks
    assert (webhook.kind.kind, webhook.validate, webhook.default) == ("Tenant", True, False)


def test_a_tenant_becomes_a_quota_limits_and_settings() -> None:
    got = reconciling().reconcile(tenant(containerDefaults={"cpu": "250m", "memory": "256Mi"}, settings={"billing-code": "4711"}))

    assert got.error == ""
    assert got.children_complete
    by_kind = {c.kind: c for c in got.desired_children}
    assert sorted(by_kind) == ["ConfigMap", "LimitRange", "ResourceQuota"]
    assert all(c.name == "tenant-payments" and c.namespace == "team-payments" for c in got.desired_children)
    assert by_kind["ResourceQuota"]["spec"] == {"hard": {"requests.cpu": "8", "requests.memory": "16Gi", "pods": "50"}}
    assert by_kind["LimitRange"]["spec"]["limits"] == [
        {"type": "Container", "default": {"cpu": "250m", "memory": "256Mi"}, "defaultRequest": {"cpu": "250m", "memory": "256Mi"}}
    ]
    assert by_kind["ConfigMap"]["data"] == {"owner": "payments@example.com", "billing-code": "4711"}
    assert got.status is not None
    assert got.status["observedGeneration"] == 3
    assert got.status["children"] == ["ResourceQuota/tenant-payments", "ConfigMap/tenant-payments", "LimitRange/tenant-payments"]
    (ready,) = got.status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"], ready["observedGeneration"]) == ("Ready", "True", "Reconciled", 3)
    assert [e.reason for e in got.events] == ["Reconciled"]


def test_the_children_are_typed_built_in_kinds_sent_as_the_api_servers_json() -> None:
    t = Tenant.parse(tenant(containerDefaults={"cpu": "1"}))
    quota, limits, settings = resource_quota(t), limit_range(t), config_map(t)
    assert (type(quota), type(limits), type(settings)) == (ResourceQuota, LimitRange, ConfigMap)
    assert quota.spec is not None and quota.spec.hard == {"requests.cpu": "8", "requests.memory": "16Gi", "pods": "50"}
    by_kind = {c.kind: c for c in reconciling().reconcile(tenant(containerDefaults={"cpu": "1"})).desired_children}
    for child in (quota, limits, settings):
        assert by_kind[str(child.kind)] == child.to_dict()
    assert by_kind["ConfigMap"]["apiVersion"] == "v1"
    assert by_kind["ConfigMap"]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "tenant-operator",
        "examples.polyop.dev/tenant": "payments",
    }


def test_without_container_defaults_the_limit_range_is_not_declared_and_so_pruned() -> None:
    got = reconciling().reconcile(tenant())
    assert sorted(c.kind for c in got.desired_children) == ["ConfigMap", "ResourceQuota"]
    assert got.children_complete


def test_an_unchanged_generation_records_no_event_again() -> None:
    t = tenant()
    t["status"] = {"observedGeneration": 3}
    assert reconciling().reconcile(t).events == []


def test_the_quota_usage_is_read_from_the_tenants_quota_by_the_index() -> None:
    payments = tenant()
    other = copy.deepcopy(payments)
    other["metadata"].update(name="sales", uid="u-2")
    got = reconciling(
        quota("tenant-payments", payments, pods="3", **{"requests.cpu": "1500m"}),
        quota("tenant-sales", other, pods="40"),
        quota("team-wide", None, pods="45"),
    ).reconcile(payments)
    assert got.status is not None and got.status["used"] == {"pods": "3", "requests.cpu": "1500m"}


def test_an_invalid_spec_is_a_terminal_error_on_the_ready_condition() -> None:
    got = reconciling().reconcile(tenant(quota={"cpu": "-1"}))
    assert got.terminal and "spec.quota.cpu: must be greater than zero" in got.error
    assert got.desired_children == []
    assert got.status is not None and got.status["conditions"][0]["reason"] == "InvalidSpec"
    assert [(e.type, e.reason) for e in got.events] == [("Warning", "InvalidSpec")]


@pytest.mark.parametrize(
    ("spec", "field_errors"),
    [
        pytest.param({"quota": {"cpu": "lots"}}, [("spec.quota.cpu", FieldErrorType.INVALID)], id="a quota that is not a quantity"),
        pytest.param({"quota": {"memory": "0"}}, [("spec.quota.memory", FieldErrorType.INVALID)], id="a zero quota"),
        pytest.param({"quota": {"pods": "2.5"}}, [("spec.quota.pods", FieldErrorType.INVALID)], id="a fraction of a pod"),
        pytest.param({"owner": ""}, [("spec.owner", FieldErrorType.REQUIRED)], id="no owner"),
        pytest.param(
            {"quota": {"cpu": "1"}, "containerDefaults": {"cpu": "2", "memory": "-5Mi"}},
            [("spec.containerDefaults.memory", FieldErrorType.INVALID), ("spec.containerDefaults.cpu", FieldErrorType.INVALID)],
            id="defaults above the quota or below zero",
        ),
    ],
)
def test_the_validator_denies_invalid_specs_field_by_field(spec: dict[str, Any], field_errors: list[tuple[str, FieldErrorType]]) -> None:
    got = Harness(sidecar).validate(tenant(**spec))
    assert not got.allowed and got.message == "Tenant 'payments' is invalid"
    assert [(f, t) for f, t, _ in got.field_errors] == field_errors


def test_the_validator_allows_a_valid_tenant_and_warns_without_a_pod_quota() -> None:
    assert Harness(sidecar).validate(tenant()).allowed
    got = Harness(sidecar).validate(tenant(quota={"cpu": "1"}))
    assert got.allowed and got.warnings == ["spec.quota.pods is not set: the tenant may create any number of pods"]


def test_the_owner_is_immutable() -> None:
    old = tenant()
    new = copy.deepcopy(old)
    new["spec"]["owner"] = "someone-else@example.com"
    got = Harness(sidecar).validate(new, old=old)
    assert [(f, t) for f, t, _ in got.field_errors] == [("spec.owner", FieldErrorType.FORBIDDEN)]
    new["spec"]["owner"] = old["spec"]["owner"]
    new["spec"]["quota"]["cpu"] = "16"
    assert Harness(sidecar).validate(new, old=old).allowed
