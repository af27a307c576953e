"""A sidecar for the end-to-end test of the Python SDK's watch: beside its
(idle) reconciler of Secrets, it declares ConfigMaps to cache and, outside
any reconcile, watches the ConfigMaps of one namespace labelled watched=yes
through the host's Watch stream, printing a line per event:

    watch: ADDED <name> <data.v>
    watch: SYNCED
    watch: MODIFIED <name> <data.v>
    watch: DELETED <name> <data.v>

    python watchprobe.py --address unix:///path/to/sidecar.sock --namespace ns
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging

import polyop

sidecar = polyop.Sidecar("watch-probe")
sidecar.cache_kind("v1/ConfigMap")


@sidecar.reconciler("v1/Secret")
def reconcile(secret: polyop.Object, ctx: polyop.Context) -> None:
    return None


async def cluster() -> polyop.AsyncCluster:
    """The Cluster client, once the host has announced its address (in Describe)."""
    while (client := sidecar.async_cluster) is None:
        await asyncio.sleep(0.05)
    return client


async def watch(namespace: str) -> None:
    try:
        events = (await cluster()).watch("v1/ConfigMap", namespace, label_selector="watched=yes")
        async with contextlib.aclosing(events):
            async for event in events:
                if event.type is polyop.WatchEventType.SYNCED:
                    print("watch: SYNCED", flush=True)
                else:
                    print(f"watch: {event.type.value} {event.object.name} {event.object.get('data', {}).get('v', '')}", flush=True)
    except polyop.ClusterError as err:
        print(f"watch failed: {err}", flush=True)


async def main(address: str, namespace: str) -> None:
    watching = asyncio.ensure_future(watch(namespace))
    try:
        await sidecar.serve_async(address)
    finally:
        watching.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--namespace", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    asyncio.run(main(args.address, args.namespace))
