"""The Cluster clients a sidecar's functions get as ``ctx.cluster``: given, or
made on first use for the address the host announces."""

from __future__ import annotations

import asyncio
import os
import threading

from polyop.cluster import ADDRESS_ENV, AsyncCluster, Cluster

__all__ = ["Clients"]


class Clients:
    """``cluster`` is the Cluster client handed to plain functions,
    ``async_cluster`` the AsyncCluster handed to ``async def`` ones; by
    default they are made, on first use, for the address the host sends in
    its DescribeRequest, or else POLYOP_CLUSTER_ADDRESS (the AsyncCluster on
    the serving event loop)."""

    def __init__(self, cluster: Cluster | None = None, async_cluster: AsyncCluster | None = None) -> None:
        self._lock = threading.Lock()
        self._cluster = cluster
        self._async_cluster = async_cluster
        self._async_cluster_loop: asyncio.AbstractEventLoop | None = None
        self._address = ""

    def announced(self, address: str) -> None:
        """The host announced its Cluster service at address (the first announcement holds)."""
        with self._lock:
            if address and not self._address:
                self._address = address

    @property
    def cluster(self) -> Cluster | None:
        """The Cluster client, or None while no address is known."""
        with self._lock:
            if self._cluster is None:
                address = self._address_locked()
                if address:
                    self._cluster = Cluster(address)
            return self._cluster

    @property
    def async_cluster(self) -> AsyncCluster | None:
        """The AsyncCluster client of the running event loop, or None while no
        address is known. One made here belongs to the loop it was first used
        on; on another loop (a second ``serve_async``) a new one is made."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._async_cluster is not None and self._async_cluster_loop in (None, loop):
                return self._async_cluster
            address = self._address_locked()
            if not address:
                return None
            self._async_cluster, self._async_cluster_loop = AsyncCluster(address), loop
            return self._async_cluster

    async def close_async_cluster(self) -> None:
        """Close the AsyncCluster made on the running loop, as its server stops;
        one given to the sidecar stays open."""
        with self._lock:
            cluster, loop = self._async_cluster, self._async_cluster_loop
            if cluster is None or loop is not asyncio.get_running_loop():
                return
            self._async_cluster = self._async_cluster_loop = None
        await cluster.close()

    def _address_locked(self) -> str:
        return self._address or os.environ.get(ADDRESS_ENV, "")
