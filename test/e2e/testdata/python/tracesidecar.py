"""A sidecar for the tracing end-to-end test, in Python.

It does what the Go SDK's testsidecar trace does: its controller "copier"
reconciles ConfigMaps, lists the Secrets of the ConfigMap's namespace through
the host's Cluster service, and desires one Secret, "<name>-copy", holding the
ConfigMap's data. Tracing is set up by the SDK from the OTEL_* environment
variables (the polyop[otlp] extra is installed in .venv).

    python tracesidecar.py --address unix:///path/to/sidecar.sock
"""

from __future__ import annotations

import argparse
import logging

from opentelemetry import trace

import polyop

sidecar = polyop.Sidecar("tracesidecar")


@sidecar.reconciler("v1/ConfigMap", name="copier", owns=["v1/Secret"])
def copy(cm: polyop.Object, ctx: polyop.Context) -> polyop.Result:
    secrets = ctx.cluster.list("v1/Secret", cm.namespace)
    # A span attribute of the user's own, on the handler's span.
    trace.get_current_span().set_attribute("copier.secrets", len(secrets.items))
    ctx.log.info("Copying the ConfigMap secrets=%d", len(secrets.items))
    copied = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{cm.name}-copy"}, "stringData": dict(cm.get("data") or {})}
    return polyop.Result(desired_children=[copied], children_complete=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    sidecar.serve(parser.parse_args().address)
