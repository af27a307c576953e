"""A sidecar for the end-to-end test of declared indexes in the Python SDK,
the counterpart of testsidecar index: it reconciles Secrets and, for each,
lists the ConfigMaps of its namespace by two declared indexes, from the
host's cache — ".metadata.controller" (a field path: the controller owner's
name) and "parent" (CEL: data.parent) — and applies what it found to the
ConfigMap <secret>-summary: byController and byParent (sorted,
comma-separated) and source ("Cache" when both Lists came from the cache).
It asks to be reconciled again every 200ms.

    python indexprobe.py --address unix:///path/to/sidecar.sock
"""

from __future__ import annotations

import argparse
import logging

import polyop

sidecar = polyop.Sidecar("index-probe")
sidecar.index("v1/ConfigMap", ".metadata.controller", path=".metadata.ownerReferences[?(@.controller==true)].name")
sidecar.index("v1/ConfigMap", "parent", cel="has(object.data) && has(object.data.parent) ? [object.data.parent] : []")
sidecar.cache_kind("v1/ConfigMap")


@sidecar.reconciler("v1/Secret")
def summarize(secret: polyop.Object, ctx: polyop.Context) -> polyop.Result:
    ns, name = secret.namespace, secret.name
    by_controller = ctx.cluster.list("v1/ConfigMap", namespace=ns, field_selector=f".metadata.controller={name}")
    by_parent = ctx.cluster.list("v1/ConfigMap", namespace=ns, field_selector=f"parent={name}")
    cached = by_controller.source == polyop.ReadSource.CACHE and by_parent.source == polyop.ReadSource.CACHE
    ctx.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-summary", "namespace": ns},
            "data": {
                "byController": ",".join(sorted(o.name for o in by_controller.items)),
                "byParent": ",".join(sorted(o.name for o in by_parent.items)),
                "source": "Cache" if cached else "not the cache",
            },
        },
        field_manager="index-probe",
        force=True,
    )
    return polyop.Result(requeue_after=0.2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    logging.basicConfig(level=logging.INFO)
    sidecar.serve(parser.parse_args().address)
