"""The Tenant reconciler and validator.

The children are built-in kinds, typed with lightkube's models
(lightkube.resources for the kinds, lightkube.models for their parts): the
SDK takes them as kinds (``owns=``) and as desired children, and sends them
as the API server's JSON.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from lightkube.models.core_v1 import LimitRangeItem, LimitRangeSpec, ResourceQuotaSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, LimitRange, ResourceQuota

import polyop
from polyop import FieldError, UpdateFilter

from tenant.api import Tenant
from tenant.quantity import parse_quantity

# The validator takes the object as the API server sends it (a polyop.Object),
# not the model: it reports every invalid field, also of objects the model
# would not read.
TENANT = "examples.polyop.dev/v1/Tenant"

# spec.quota's keys and the ResourceQuota resources they limit.
QUOTA_RESOURCES = {
    "cpu": "requests.cpu",
    "memory": "requests.memory",
    "storage": "requests.storage",
    "pods": "pods",
}
sidecar = polyop.Sidecar("tenant-operator")

TENANT_INDEX = "tenant"
"""The index of ResourceQuotas by the name of the Tenant that owns them. The
host keeps it in its cache, by the field path declared here, so that a List
with ``field_selector=f"{TENANT_INDEX}={name}"`` finds a tenant's quotas at
once, as kubebuilder's CronJob tutorial finds its Jobs with IndexField."""
sidecar.index(ResourceQuota, TENANT_INDEX, field_path='.metadata.ownerReferences[?(@.kind=="Tenant")].name')


@sidecar.reconciler(
    Tenant,
    owns=[ResourceQuota, LimitRange, ConfigMap],
    # Status writes do not reconcile again; events on the children still do.
    update_filters=[UpdateFilter.GENERATION_CHANGED],
    max_concurrent_reconciles=4,
)
def reconcile(tenant: Tenant, ctx: polyop.Context) -> polyop.Result:
    """Declare the tenant's children; the host applies them and prunes the rest.

    The tenant arrives as its model (tenant.api); the status set on it is what
    the host writes, also when this raises."""
    generation = tenant.metadata.generation or 0
    problems = validate_spec(tenant.spec.to_dict())
    if problems:
        # The webhook refuses such a spec; without it, say so on the object.
        message = "; ".join(f"{e.field}: {e.detail}" for e in problems)
        tenant.status.set_condition(polyop.READY, False, "InvalidSpec", message, observed_generation=generation)
        ctx.event("Warning", "InvalidSpec", message)
        raise polyop.TerminalError(message)

    children: list[ResourceQuota | LimitRange | ConfigMap] = [resource_quota(tenant), config_map(tenant)]
    if tenant.spec.container_defaults is not None:
        children.append(limit_range(tenant))

    # The quota's usage, as the API server's quota controller counts it, read
    # from the host's cache by the tenant index.
    namespace, name = tenant.metadata.namespace or "", tenant.metadata.name
    quotas = ctx.cluster.list(ResourceQuota, namespace, field_selector=f"{TENANT_INDEX}={name}")
    for quota in quotas.items:
        used = (quota.get("status") or {}).get("used")
        if used:
            tenant.status.used = used

    if tenant.status.observed_generation != generation:
        ctx.event("Normal", "Reconciled", f"applied {', '.join(str(c.kind) for c in children)}")
    tenant.status.observed_generation = generation
    tenant.status.children = [f"{c.kind}/{child_name(tenant)}" for c in children]
    tenant.status.set_condition(
        polyop.READY, True, "Reconciled", "the quota, limits and settings are applied", observed_generation=generation
    )
    return polyop.Result(desired_children=children, children_complete=True)


@sidecar.validator(TENANT)
def validate(obj: polyop.Object, req: polyop.AdmissionRequest) -> list[str]:
    """Refuse quotas that are not positive quantities, and any change of owner."""
    spec = obj.spec
    errors = validate_spec(spec)
    if req.old_object is not None:
        old_owner = req.old_object.spec.get("owner")
        if spec.get("owner") != old_owner:
            errors.append(FieldError.forbidden("spec.owner", f"is immutable: the tenant belongs to {old_owner!r}"))
    if errors:
        raise polyop.DeniedError(f"Tenant {req.name!r} is invalid", errors)
    warnings = []
    if "pods" not in spec.get("quota", {}):
        warnings.append("spec.quota.pods is not set: the tenant may create any number of pods")
    return warnings


def validate_spec(spec: dict[str, Any]) -> list[FieldError]:
    """The field errors of a Tenant's spec."""
    errors: list[FieldError] = []
    if not spec.get("owner"):
        errors.append(FieldError.required("spec.owner", "every tenant has an owner"))
    quota = positive_quantities(spec.get("quota") or {}, "spec.quota", errors)
    if "pods" in quota and quota["pods"] != quota["pods"].to_integral_value():
        errors.append(FieldError.invalid("spec.quota.pods", spec["quota"]["pods"], "must be a whole number of pods"))
    defaults = positive_quantities(spec.get("containerDefaults") or {}, "spec.containerDefaults", errors)
    for key, value in defaults.items():
        if key in quota and value > quota[key]:
            errors.append(
                FieldError.invalid(
                    f"spec.containerDefaults.{key}", spec["containerDefaults"][key],
                    f"must not exceed spec.quota.{key} ({spec['quota'][key]})",
                )
            )
    return errors


def positive_quantities(values: dict[str, Any], path: str, errors: list[FieldError]) -> dict[str, Decimal]:
    parsed = {}
    for key, raw in values.items():
        try:
            value = parse_quantity(raw)
        except ValueError as err:
            errors.append(FieldError.invalid(f"{path}.{key}", raw, str(err)))
            continue
        if value <= 0:
            errors.append(FieldError.invalid(f"{path}.{key}", raw, "must be greater than zero"))
            continue
        parsed[key] = value
    return parsed


def child_name(tenant: Tenant) -> str:
    """The name of each of the tenant's children: in its namespace, named after it."""
    return f"tenant-{tenant.metadata.name}"


def child_metadata(tenant: Tenant) -> ObjectMeta:
    return ObjectMeta(
        name=child_name(tenant),
        namespace=tenant.metadata.namespace,
        labels={"app.kubernetes.io/managed-by": sidecar.name, "examples.polyop.dev/tenant": tenant.metadata.name or ""},
    )


def resource_quota(tenant: Tenant) -> ResourceQuota:
    hard = {QUOTA_RESOURCES[k]: str(v) for k, v in tenant.spec.quota.to_dict().items()}
    return ResourceQuota(metadata=child_metadata(tenant), spec=ResourceQuotaSpec(hard=hard))


def limit_range(tenant: Tenant) -> LimitRange:
    assert tenant.spec.container_defaults is not None
    defaults = {k: str(v) for k, v in tenant.spec.container_defaults.to_dict().items()}
    item = LimitRangeItem(type="Container", default=defaults, defaultRequest=defaults)
    return LimitRange(metadata=child_metadata(tenant), spec=LimitRangeSpec(limits=[item]))


def config_map(tenant: Tenant) -> ConfigMap:
    return ConfigMap(metadata=child_metadata(tenant), data={"owner": tenant.spec.owner, **(tenant.spec.settings or {})})
