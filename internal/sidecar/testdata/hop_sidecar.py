"""The Python side of BenchmarkHopPython: a sidecar built with the polyop
Python SDK whose reconciler does what the Go benchmark's does to a
MaintenanceWindow (phase, observed generation, a Ready condition, requeue
after an hour), so that the two hops compare like for like.

    python hop_sidecar.py unix:///path/to/sidecar.sock
"""

import sys

import polyop

sidecar = polyop.Sidecar("bench")


@sidecar.reconciler("examples.polyop.dev/v1/MaintenanceWindow", name="maintenancewindow")
def reconcile(mw: polyop.Object, ctx: polyop.Context) -> polyop.Result:
    generation = mw.meta.generation
    mw.status["phase"] = "Active"
    mw.status["observedGeneration"] = generation
    polyop.set_condition(mw.conditions, polyop.READY, True, "Scheduled", "the window is open", observed_generation=generation)
    return polyop.Result(requeue_after=3600)


if __name__ == "__main__":
    sidecar.serve(sys.argv[1])
