"""A client of the host's Cluster service: read and write the cluster through the host.

Reads come from the host's informer cache for the kinds it watches and from
the API server otherwise; writes go through the host's client, with the host's
credentials. Inside a reconcile, use ``ctx.cluster``; elsewhere,
``Cluster()`` dials the address in POLYOP_CLUSTER_ADDRESS::

    try:
        secret = ctx.cluster.get("v1/Secret", "db-password", namespace=tenant.namespace)
    except polyop.NotFoundError:
        ...

:class:`AsyncCluster` has the same methods as coroutines, on a grpc.aio
channel; an ``async def`` reconciler gets one as ``ctx.cluster``::

    secret = await ctx.cluster.get("v1/Secret", "db-password", namespace=tenant.namespace)

Every request names its object the same way, as the contract does: its kind
and key (namespace and name). Errors the API server answered with raise
:class:`polyop.APIError` subclasses (NotFoundError, AlreadyExistsError,
ConflictError, InvalidError, ForbiddenError, ...); other failures raise
:class:`polyop.ClusterError`. A Cluster is safe to share between threads; an
AsyncCluster belongs to the event loop it was made on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping
from typing import Any, TypeVar, overload

import grpc
import grpc.aio

from polyop._address import parse_address
from polyop._events import EventType
from polyop._kinds import KindRef, ObjectLike, SupportsToDict, from_mapping, gvk_of
from polyop._requests import (
    ObjectList,
    Patch,
    PatchType,
    Propagation,
    ReadSource,
    ResolvedKind,
    _Call,
    _Requests,
)
from polyop._tracing import client_span
from polyop._watch import WatchEvent, WatchEventType, watch
from polyop.crd import KindInfo
from polyop.errors import ClusterError, from_aio_error, from_rpc_error
from polyop.objects import KindLike, Object
from polyop.v1alpha1 import cluster_pb2, cluster_pb2_grpc

__all__ = [
    "ADDRESS_ENV",
    "OWNER_UID_INDEX",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "TLS_CA_FILE_ENV",
    "TLS_CERT_FILE_ENV",
    "TLS_KEY_FILE_ENV",
    "AsyncCluster",
    "Cluster",
    "ObjectList",
    "Patch",
    "PatchType",
    "Propagation",
    "ReadSource",
    "ResolvedKind",
    "WatchEvent",
    "WatchEventType",
    "tls_credentials",
    "tls_credentials_from_env",
]

OWNER_UID_INDEX = ".metadata.controllerUID"
"""The index the host keeps on every kind a controller owns: the UID of an
object's controller owner. ``ctx.cluster.list(kind, namespace=ns,
field_selector=f"{OWNER_UID_INDEX}={owner.uid}")`` lists an owner's children
from the host's cache."""

ADDRESS_ENV = "POLYOP_CLUSTER_ADDRESS"
"""The environment variable holding the Cluster service's address."""

TLS_CA_FILE_ENV = "POLYOP_CLUSTER_TLS_CA_FILE"
"""The environment variable naming the PEM file of the CA that signed the
host's Cluster service certificate (``--cluster-tls-cert-file``). Setting it
turns TLS on."""

TLS_CERT_FILE_ENV = "POLYOP_CLUSTER_TLS_CERT_FILE"
"""The environment variable naming the PEM file of the client certificate the
sidecar presents, signed by the CA of the host's ``--cluster-tls-client-ca-file``."""

TLS_KEY_FILE_ENV = "POLYOP_CLUSTER_TLS_KEY_FILE"
"""The environment variable naming the PEM file of the client certificate's key."""


def tls_credentials(ca_file: str, cert_file: str = "", key_file: str = "") -> grpc.ChannelCredentials:
    """Channel credentials that verify the host's certificate against the CA in
    ``ca_file`` and present the client certificate in ``cert_file`` and
    ``key_file``, as the host's mutual TLS requires."""
    if bool(cert_file) != bool(key_file):
        raise ClusterError("a client certificate needs both its certificate and its key file")

    def read(path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(
        root_certificates=read(ca_file),
        private_key=read(key_file) if key_file else None,
        certificate_chain=read(cert_file) if cert_file else None,
    )


def tls_credentials_from_env() -> grpc.ChannelCredentials | None:
    """:func:`tls_credentials` of the files POLYOP_CLUSTER_TLS_CA_FILE,
    POLYOP_CLUSTER_TLS_CERT_FILE and POLYOP_CLUSTER_TLS_KEY_FILE name, or None
    (plain text) when POLYOP_CLUSTER_TLS_CA_FILE is not set."""
    ca = os.environ.get(TLS_CA_FILE_ENV, "")
    cert, key = os.environ.get(TLS_CERT_FILE_ENV, ""), os.environ.get(TLS_KEY_FILE_ENV, "")
    if not ca:
        if cert or key:
            raise ClusterError(
                f"{TLS_CERT_FILE_ENV} and {TLS_KEY_FILE_ENV} are set but {TLS_CA_FILE_ENV} is not: "
                "TLS needs the CA that signed the host's certificate"
            )
        return None
    return tls_credentials(ca, cert, key)

DEFAULT_MAX_MESSAGE_SIZE = 64 << 20
"""The largest message a client sends or receives, the host's default --max-message-size."""

_T = TypeVar("_T")
_Typed = TypeVar("_Typed", bound=SupportsToDict)


def _channel_options(max_message_size: int) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.max_receive_message_length", max_message_size),
    ]


def _target(address: str | None) -> str:
    address = address or os.environ.get(ADDRESS_ENV, "")
    if not address:
        raise ClusterError(f"no Cluster service address: pass one or set {ADDRESS_ENV}")
    return parse_address(address).grpc_target


class Cluster(_Requests):
    """A client of the host's Cluster service.

    ``address`` takes the forms of the host's flags (``unix:///abs.sock``,
    ``unix:rel.sock``, ``tcp://host:port``, ``host:port``) and defaults to
    POLYOP_CLUSTER_ADDRESS; a relative socket path is made absolute.
    ``credentials`` dial it with TLS (see :func:`tls_credentials`) and default
    to :func:`tls_credentials_from_env`: TLS when POLYOP_CLUSTER_TLS_CA_FILE is
    set, plain text otherwise. ``field_manager`` is the default field manager
    of writes (the host's, ``polyop-<sidecar name>``, when empty); ``timeout``
    the deadline of each call in seconds. The channel connects lazily.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        field_manager: str = "",
        timeout: float | None = 30.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        channel: grpc.Channel | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        super().__init__(field_manager)
        self.timeout = timeout
        self._owns_channel = channel is None
        if channel is None:
            target = _target(address)
            credentials = credentials or tls_credentials_from_env()
            if credentials is None:
                channel = grpc.insecure_channel(target, options=_channel_options(max_message_size))
            else:
                channel = grpc.secure_channel(target, credentials, options=_channel_options(max_message_size))
        self._channel = channel
        self._stub = cluster_pb2_grpc.ClusterServiceStub(channel)

    def close(self) -> None:
        """Close the channel the client dialed (a channel passed in stays open)."""
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # Reads.

    @overload
    def get(
        self, kind: type[_T], name: str, namespace: str = "", *, uncached: bool = False, subresource: str = ""
    ) -> _T: ...
    @overload
    def get(
        self, kind: KindLike | KindInfo, name: str, namespace: str = "", *, uncached: bool = False, subresource: str = ""
    ) -> Object: ...
    def get(
        self, kind: KindRef, name: str, namespace: str = "", *, uncached: bool = False, subresource: str = ""
    ) -> Any:
        """Read one object; raises NotFoundError when it does not exist.

        With ``kind`` a typed class (a :class:`polyop.crd.Resource`, a
        lightkube resource such as ``lightkube.resources.core_v1.ConfigMap``)
        the object is returned as an instance of it, else as an
        :class:`~polyop.Object`. ``uncached`` reads from the API server even
        when the host caches the kind. With ``subresource`` (for example
        ``"scale"``), read that subresource of the object from the API server
        instead, such as an autoscaling/v1 Scale; ``"status"`` is the object
        itself."""
        return _typed(kind, self._run(self._get(kind, name, namespace, uncached, subresource)), subresource)

    def list(
        self,
        kind: KindRef,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        uncached: bool = False,
    ) -> ObjectList:
        """List objects of a kind (the item kind, such as ``"v1/ConfigMap"``), in
        one namespace or all; selectors take kubectl's syntax."""
        return self._run(self._list(kind, namespace, label_selector, field_selector, limit, continue_token, uncached))

    def resolve_kind(self, kind: KindRef) -> ResolvedKind:
        """Map a kind to its resource and scope; a GVK with an empty version
        resolves the API server's preferred version."""
        return self._run(self._resolve_kind(kind))

    # Writes.

    @overload
    def create(self, obj: _Typed, *, dry_run: bool = False, field_manager: str = "") -> _Typed: ...
    @overload
    def create(self, obj: Mapping[str, Any], *, dry_run: bool = False, field_manager: str = "") -> Object: ...
    def create(self, obj: ObjectLike, *, dry_run: bool = False, field_manager: str = "") -> Any:
        """Create an object (with apiVersion, kind and metadata.name or
        generateName); returns it as stored. A typed object (a
        :class:`polyop.crd.Resource`, a lightkube model) is sent as its
        ``to_dict()`` and returned as its own type."""
        return _like(obj, self._run(self._create(obj, dry_run, field_manager)))

    def create_subresource(
        self,
        kind: KindRef,
        name: str,
        namespace: str = "",
        *,
        subresource: str,
        body: Mapping[str, Any],
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object:
        """Create a subresource of an existing object, named by the object's
        kind and key, for example evict a Pod::

            cluster.create_subresource("v1/Pod", "web-0", "shop", subresource="eviction",
                                       body={"apiVersion": "policy/v1", "kind": "Eviction"})

        ``body`` is the subresource's object (an Eviction, a TokenRequest); its
        name and namespace default to the object's. Returns what the API
        server answered: a TokenRequest with its token, a Status for an
        eviction."""
        return self._run(self._create_subresource(kind, name, namespace, subresource, body, dry_run, field_manager))

    @overload
    def update(
        self, obj: _Typed, *, subresource: str = "", dry_run: bool = False, field_manager: str = ""
    ) -> _Typed: ...
    @overload
    def update(
        self, obj: Mapping[str, Any], *, subresource: str = "", dry_run: bool = False, field_manager: str = ""
    ) -> Object: ...
    def update(
        self, obj: ObjectLike, *, subresource: str = "", dry_run: bool = False, field_manager: str = ""
    ) -> Any:
        """Replace an object, or its subresource (``subresource="status"``), with
        optimistic concurrency on metadata.resourceVersion: raises
        ConflictError when the object changed since it was read."""
        return _like(obj, self._run(self._update(obj, subresource, dry_run, field_manager)))

    def patch(
        self,
        kind: KindRef,
        name: str,
        patch: Patch,
        namespace: str = "",
        *,
        type: PatchType = PatchType.MERGE,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object:
        """Patch an object or its subresource: a merge patch by default, or a
        JSON patch (a list of operations), a strategic merge patch or an
        apply (``force`` takes fields other managers own, apply only)."""
        return self._run(self._patch(kind, name, patch, namespace, type, subresource, force, dry_run, field_manager))

    @overload
    def apply(
        self, obj: _Typed, *, subresource: str = "", force: bool = False, dry_run: bool = False, field_manager: str = ""
    ) -> _Typed: ...
    @overload
    def apply(
        self,
        obj: Mapping[str, Any],
        *,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object: ...
    def apply(
        self,
        obj: ObjectLike,
        *,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Any:
        """Server-side apply: obj is the applied configuration, with apiVersion,
        kind, metadata.name (and namespace) and the fields the manager owns;
        typed objects as for :meth:`create`."""
        return _like(obj, self._run(self._apply(obj, subresource, force, dry_run, field_manager)))

    def delete(
        self,
        kind: KindRef,
        name: str,
        namespace: str = "",
        *,
        propagation: Propagation | None = None,
        precondition_uid: str = "",
        precondition_resource_version: str = "",
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        """Delete an object; raises NotFoundError when it does not exist."""
        self._run(
            self._delete(
                kind, name, namespace, propagation, precondition_uid, precondition_resource_version,
                grace_period_seconds, dry_run,
            )
        )

    def record_event(
        self,
        kind: KindRef,
        name: str,
        namespace: str = "",
        *,
        type: EventType,
        reason: str,
        message: str,
        action: str = "",
    ) -> None:
        """Record a Kubernetes event on any object. (Inside a reconcile,
        ``ctx.event`` records on the reconciled object with no extra call.)"""
        self._run(self._record_event(kind, name, namespace, type, reason, message, action))

    # Plumbing.

    def _run(self, call: _Call[_T]) -> _T:
        return call.decode(self._invoke(call))

    def _invoke(self, call: _Call[Any]) -> Any:
        """Send one call; the in-memory FakeCluster of polyop.testing answers it itself."""
        with client_span(call.method) as traced:
            try:
                return getattr(self._stub, call.method)(call.request, timeout=self.timeout, metadata=traced.metadata)
            except grpc.RpcError as err:
                if isinstance(err, grpc.Call):
                    traced.failed(err.code(), err.details() or "")
                raise from_rpc_error(err, call.what) from err


class AsyncCluster(_Requests):
    """A client of the host's Cluster service for asyncio: the methods of
    :class:`Cluster`, as coroutines, on a grpc.aio channel.

    Make it on the event loop that uses it (``ctx.cluster`` of an ``async
    def`` reconciler is one); the arguments are :class:`Cluster`'s.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        field_manager: str = "",
        timeout: float | None = 30.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        channel: grpc.aio.Channel | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        super().__init__(field_manager)
        self.timeout = timeout
        self._owns_channel = channel is None
        if channel is None:
            target = _target(address)
            credentials = credentials or tls_credentials_from_env()
            if credentials is None:
                channel = grpc.aio.insecure_channel(target, options=_channel_options(max_message_size))
            else:
                channel = grpc.aio.secure_channel(target, credentials, options=_channel_options(max_message_size))
        self._channel = channel
        self._stub = cluster_pb2_grpc.ClusterServiceStub(channel)

    async def close(self) -> None:
        """Close the channel the client dialed (a channel passed in stays open)."""
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> AsyncCluster:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    @overload
    async def get(
        self, kind: type[_T], name: str, namespace: str = "", *, uncached: bool = False, subresource: str = ""
    ) -> _T: ...
    @overload
    async def get(
        self, kind: KindLike | KindInfo, name: str, namespace: str = "", *, uncached: bool = False, subresource: str = ""
    ) -> Object: ...
    async def get(
        self, kind: KindRef, name: str, namespace: str = "", *, uncached: bool = False, subresource: str = ""
    ) -> Any:
        """:meth:`Cluster.get`."""
        return _typed(kind, await self._run(self._get(kind, name, namespace, uncached, subresource)), subresource)

    async def list(
        self,
        kind: KindRef,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        uncached: bool = False,
    ) -> ObjectList:
        """:meth:`Cluster.list`."""
        return await self._run(self._list(kind, namespace, label_selector, field_selector, limit, continue_token, uncached))

    async def resolve_kind(self, kind: KindRef) -> ResolvedKind:
        """:meth:`Cluster.resolve_kind`."""
        return await self._run(self._resolve_kind(kind))

    def watch(
        self, kind: KindRef, namespace: str = "", *, label_selector: str = "", field_selector: str = ""
    ) -> AsyncGenerator[WatchEvent, None]:
        """Watch the objects of a kind the host caches, in one namespace or
        all, through the host's Watch stream: first every object the host
        holds, each ADDED, then one SYNCED (your view is complete), then
        every change, ADDED, MODIFIED or DELETED::

            async with contextlib.aclosing(cluster.watch("v1/ConfigMap", "shop")) as events:
                async for event in events:
                    if event.type is polyop.WatchEventType.DELETED:
                        view.pop(event.object.name, None)
                    elif event.type is not polyop.WatchEventType.SYNCED:
                        view[event.object.name] = event.object

        ``label_selector`` takes kubectl's syntax; ``field_selector`` selects
        ``metadata.name`` and ``metadata.namespace`` only. The watch resumes
        by itself when the stream ends (the host restarted, or the reader fell
        so far behind that the host cut it off): from the last version it
        delivered or, when the host no longer remembers it, by listing again:
        ADDED or MODIFIED for every object, DELETED for those that went
        meanwhile (with only their kind, name and namespace), then SYNCED
        again. It raises :class:`~polyop.ClusterError` when it cannot go on
        (the host does not cache the kind, with the remedy; a selector it
        refuses). Read promptly: the host holds about a thousand events for a
        reader before it cuts it off. Closing the iterator (``aclose``, or
        leaving ``contextlib.aclosing``), or cancelling the task that reads
        it, cancels the stream; the call has no deadline.
        """
        return watch(self._watch_stream, gvk_of(kind), namespace, label_selector, field_selector)

    @overload
    async def create(self, obj: _Typed, *, dry_run: bool = False, field_manager: str = "") -> _Typed: ...
    @overload
    async def create(self, obj: Mapping[str, Any], *, dry_run: bool = False, field_manager: str = "") -> Object: ...
    async def create(self, obj: ObjectLike, *, dry_run: bool = False, field_manager: str = "") -> Any:
        """:meth:`Cluster.create`."""
        return _like(obj, await self._run(self._create(obj, dry_run, field_manager)))

    async def create_subresource(
        self,
        kind: KindRef,
        name: str,
        namespace: str = "",
        *,
        subresource: str,
        body: Mapping[str, Any],
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object:
        """:meth:`Cluster.create_subresource`."""
        return await self._run(self._create_subresource(kind, name, namespace, subresource, body, dry_run, field_manager))

    @overload
    async def update(
        self, obj: _Typed, *, subresource: str = "", dry_run: bool = False, field_manager: str = ""
    ) -> _Typed: ...
    @overload
    async def update(
        self, obj: Mapping[str, Any], *, subresource: str = "", dry_run: bool = False, field_manager: str = ""
    ) -> Object: ...
    async def update(
        self, obj: ObjectLike, *, subresource: str = "", dry_run: bool = False, field_manager: str = ""
    ) -> Any:
        """:meth:`Cluster.update`."""
        return _like(obj, await self._run(self._update(obj, subresource, dry_run, field_manager)))

    async def patch(
        self,
        kind: KindRef,
        name: str,
        patch: Patch,
        namespace: str = "",
        *,
        type: PatchType = PatchType.MERGE,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object:
        """:meth:`Cluster.patch`."""
        return await self._run(self._patch(kind, name, patch, namespace, type, subresource, force, dry_run, field_manager))

    @overload
    async def apply(
        self, obj: _Typed, *, subresource: str = "", force: bool = False, dry_run: bool = False, field_manager: str = ""
    ) -> _Typed: ...
    @overload
    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object: ...
    async def apply(
        self,
        obj: ObjectLike,
        *,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Any:
        """:meth:`Cluster.apply`."""
        return _like(obj, await self._run(self._apply(obj, subresource, force, dry_run, field_manager)))

    async def delete(
        self,
        kind: KindRef,
        name: str,
        namespace: str = "",
        *,
        propagation: Propagation | None = None,
        precondition_uid: str = "",
        precondition_resource_version: str = "",
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        """:meth:`Cluster.delete`."""
        await self._run(
            self._delete(
                kind, name, namespace, propagation, precondition_uid, precondition_resource_version,
                grace_period_seconds, dry_run,
            )
        )

    async def record_event(
        self,
        kind: KindRef,
        name: str,
        namespace: str = "",
        *,
        type: EventType,
        reason: str,
        message: str,
        action: str = "",
    ) -> None:
        """:meth:`Cluster.record_event`."""
        await self._run(self._record_event(kind, name, namespace, type, reason, message, action))

    async def _run(self, call: _Call[_T]) -> _T:
        return call.decode(await self._invoke(call))

    async def _invoke(self, call: _Call[Any]) -> Any:
        with client_span(call.method) as traced:
            try:
                return await getattr(self._stub, call.method)(call.request, timeout=self.timeout, metadata=traced.metadata)
            except grpc.aio.AioRpcError as err:
                traced.failed(err.code(), err.details() or "")
                raise from_aio_error(err.code(), err.details() or "", err.trailing_metadata(), call.what) from err

    async def _watch_stream(self, request: cluster_pb2.WatchRequest) -> AsyncGenerator[cluster_pb2.WatchResponse, None]:
        """One Watch stream, cancelled when the iterator closes; the in-memory
        FakeCluster of polyop.testing serves it itself."""
        call = self._stub.Watch(request)
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as err:
            what = f"watching {request.kind.kind}" + (f" in {request.namespace}" if request.namespace else "")
            raise from_aio_error(err.code(), err.details() or "", err.trailing_metadata(), what) from err
        finally:
            call.cancel()




def _typed(kind: KindRef, obj: Object, subresource: str) -> Any:
    """The object read, as an instance of kind when kind is a typed class
    (a subresource other than the status is an object of its own kind)."""
    if isinstance(kind, type) and subresource in ("", "status"):
        return from_mapping(kind, obj)
    return obj


def _like(sent: ObjectLike, obj: Object) -> Any:
    """The object answered, typed as the object sent was."""
    if isinstance(sent, Mapping):
        return obj
    return from_mapping(type(sent), obj)
