"""The Tenant kind (examples.polyop.dev/v1): its spec and status, as pydantic
models. ``make generate`` writes config/crd/examples.polyop.dev_tenants.yaml
from them with ``python -m polyop.crd tenant.api``.

The schema checks what a schema can say (types, required fields, the shape of
quantities); the validating webhook (tenant.operator) checks the rest:
quantities must be positive, defaults no more than the quota, and the owner
never changes.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from polyop import crd


class Quota(crd.Model):
    """The most the tenant may request in its namespace, as Kubernetes quantities
    greater than zero; becomes the ResourceQuota's hard limits (requests.cpu,
    requests.memory, requests.storage, pods)."""

    cpu: crd.IntOrString | None = None
    """The CPU the tenant's pods may request (requests.cpu)."""
    memory: crd.IntOrString | None = None
    """The memory the tenant's pods may request (requests.memory)."""
    storage: crd.IntOrString | None = None
    """The storage the tenant's claims may request (requests.storage)."""
    pods: crd.IntOrString | None = None
    """How many pods the tenant may run."""


class ContainerDefaults(crd.Model):
    """The requests and limits of containers that set none (a LimitRange), no
    more than the quota. Without it, no LimitRange is made."""

    cpu: crd.IntOrString | None = None
    """The default CPU request and limit of a container."""
    memory: crd.IntOrString | None = None
    """The default memory request and limit of a container."""


class TenantSpec(crd.Model):
    """TenantSpec is the tenant's share."""

    owner: Annotated[str, Field(min_length=1)]
    """Who the tenant belongs to, for example a team's address. It cannot change."""
    quota: Annotated[
        Quota,
        crd.Validation(
            "has(self.cpu) || has(self.memory) || has(self.storage) || has(self.pods)",
            "name at least one of cpu, memory, storage and pods",
        ),
    ]
    container_defaults: ContainerDefaults | None = None
    settings: dict[str, str] | None = None
    """Settings for the tenant's workloads, copied into its ConfigMap."""


class TenantStatus(crd.StatusBase):
    """TenantStatus is what the operator observed: conditions (Ready is True once
    its children are applied) and the generation they describe."""

    children: list[str] | None = None
    """The children the operator keeps, as Kind/name."""
    used: dict[str, str] | None = None
    """The tenant's usage, as the ResourceQuota counts it."""


@crd.kind(
    group="examples.polyop.dev",
    version="v1",
    short_names=["tn"],
    printer_columns=[
        crd.PrinterColumn("Owner", ".spec.owner", "string"),
        crd.PrinterColumn("CPU", ".spec.quota.cpu", "string"),
        crd.PrinterColumn("Memory", ".spec.quota.memory", "string"),
        crd.PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', "string"),
        crd.PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ],
)
class Tenant(crd.Resource):
    """Tenant is a team's share of a namespace: a ResourceQuota, default container
    resources (a LimitRange) and a ConfigMap of settings, kept in step with the
    spec by the tenant operator."""

    spec: TenantSpec
    status: TenantStatus = Field(default_factory=TenantStatus)
