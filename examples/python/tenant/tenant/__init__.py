"""The Tenant operator: a polyop sidecar in Python.

A Tenant (examples.polyop.dev/v1) hands a team its share of a namespace: the
reconciler turns it into a ResourceQuota, a LimitRange with container defaults
and a ConfigMap of settings, declared as the Tenant's children; the host
applies them with server-side apply, makes the Tenant their owner and deletes
the ones no longer declared. A validating webhook refuses quotas that are not
positive Kubernetes quantities and any change of a tenant's owner.
"""

from tenant.operator import sidecar

__all__ = ["sidecar"]
