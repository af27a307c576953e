"""The Widget controller of polyop's end-to-end benchmark, as a Python sidecar.

The same logic as the Go variants (test/benchmark/widget): each reconcile
declares the Widget's ConfigMap, holding spec.data, as the complete set of its
children, and marks the Widget Ready. The host applies the ConfigMap with
server-side apply, makes the Widget its controller owner, and writes the status
when it changed.

Run it with the Python SDK importable (make's .venv has it installed):

    python widget_sidecar.py --address unix:///tmp/sidecar.sock [--max-concurrent-reconciles N]
"""

from __future__ import annotations

import argparse
import logging

import polyop

WIDGET = "bench.polyop.dev/v1alpha1/Widget"
WIDGET_LABEL = "bench.polyop.dev/widget"  # widget.WidgetLabel


def build(max_concurrent_reconciles: int) -> polyop.Sidecar:
    """Return the sidecar with the Widget controller registered."""
    sidecar = polyop.Sidecar("bench-widget")

    @sidecar.reconciler(
        WIDGET,
        name="widget",  # widget.ControllerName
        owns=["v1/ConfigMap"],
        update_filters=[polyop.UpdateFilter.GENERATION_CHANGED],
        max_concurrent_reconciles=max_concurrent_reconciles,
    )
    def reconcile(w: polyop.Object, ctx: polyop.Context) -> polyop.Result:
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": w.name, "labels": {WIDGET_LABEL: w.name}},
            "data": dict(w.spec.get("data") or {}),
        }
        generation = w.meta.generation
        w.status["observedGeneration"] = generation
        w.status["configMapName"] = w.name
        polyop.set_condition(w.conditions, "Ready", True, "ConfigMapReady", "the ConfigMap holds the data",
                             observed_generation=generation)
        return polyop.Result(desired_children=[config_map], children_complete=True)

    return sidecar


def main() -> None:
    parser = argparse.ArgumentParser(description="The benchmark's Widget sidecar, in Python.")
    parser.add_argument("--address", default=polyop.DEFAULT_ADDRESS)
    parser.add_argument("--max-concurrent-reconciles", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    build(args.max_concurrent_reconciles).serve(args.address)


if __name__ == "__main__":
    main()
