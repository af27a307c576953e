"""A sidecar for the end-to-end tests of the Python Cluster client.

It reconciles the ConfigMaps labelled polyop.dev/probe=true: for each it reads,
writes and deletes objects through the host's Cluster service, provoking the
API server's errors on purpose, and applies what it saw to a ConfigMap named
<name>-report, one key per step, for the test to read.

    python clusterprobe.py --address unix:///path/to/sidecar.sock
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

import polyop

sidecar = polyop.Sidecar("cluster-probe")
# The probe writes and reads Secrets through the Cluster service, which serves
# only the kinds the description declares.
sidecar.cache_kind("v1/Secret")


@sidecar.reconciler("v1/ConfigMap", label_selector="polyop.dev/probe=true", update_filters=[polyop.UpdateFilter.GENERATION_CHANGED])
def probe(cm: polyop.Object, ctx: polyop.Context) -> None:
    cluster, ns, name = ctx.cluster, cm.namespace, cm.name
    report: dict[str, str] = {}

    def step(key: str, fn: Callable[[], str]) -> None:
        try:
            report[key] = fn()
        except polyop.APIError as err:
            causes = ",".join(c.field for c in err.causes)
            # The API server's reason names the error class: NotFound is polyop.NotFoundError.
            assert type(err).__name__ == f"{err.reason}Error", f"{err.reason} raised as {type(err).__name__}"
            report[key] = f"{err.reason} {err.http_code} {causes}".strip()

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-secret", "namespace": ns}, "stringData": {"k": "v"}}
    step("get", lambda: cluster.get("v1/ConfigMap", name, ns).meta.uid)
    step("get-missing", lambda: cluster.get("v1/ConfigMap", f"{name}-missing", ns).name)
    step("create", lambda: cluster.create(secret).name)
    step("create-again", lambda: cluster.create(secret).name)
    stored = cluster.get("v1/Secret", f"{name}-secret", ns, uncached=True)
    step("update", lambda: cluster.update({**stored, "metadata": {**stored["metadata"], "labels": {"step": "update"}}}).meta.labels["step"])
    step("update-stale", lambda: cluster.update(stored).name)
    step("create-invalid", lambda: cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_A_Name", "namespace": ns}}).name)
    step("patch", lambda: cluster.patch("v1/Secret", f"{name}-secret", {"metadata": {"labels": {"step": "patch"}}}, ns).meta.labels["step"])
    step(
        "apply",
        lambda: cluster.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-applied", "namespace": ns}, "data": {"a": "1"}},
            field_manager="cluster-probe",
        )["data"]["a"],
    )
    step("list", lambda: str(len(cluster.list("v1/Secret", ns, label_selector="step=patch", uncached=True).items)))
    step("list-cached", lambda: cluster.list("v1/ConfigMap", ns).source.name)
    step("delete", lambda: str(cluster.delete("v1/Secret", f"{name}-secret", ns)))
    step("delete-again", lambda: str(cluster.delete("v1/Secret", f"{name}-secret", ns)))
    step("resolve", lambda: cluster.resolve_kind("apps/v1/Deployment").resource)
    cluster.record_event("v1/ConfigMap", name, ns, type="Normal", reason="Probed", message=f"{len(report)} steps")
    cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-report", "namespace": ns}, "data": report},
        field_manager="cluster-probe",
        force=True,
    )
    ctx.log.info("Probed: %s", report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    logging.basicConfig(level=logging.INFO)
    sidecar.serve(parser.parse_args().address)
