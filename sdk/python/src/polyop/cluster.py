"""A client of the host's Cluster service: read and write the cluster through the host.

Reads come from the host's informer cache for the kinds it watches and from
the API server otherwise; writes go through the host's client, with the host's
credentials. Inside a reconcile, use ``ctx.cluster``; elsewhere,
``Cluster()`` dials the address in POLYOP_CLUSTER_ADDRESS::

    try:
        secret = ctx.cluster.get("v1/Secret", "db-password", namespace=tenant.namespace)
    except polyop.NotFound:
        ...

Errors the API server answered with raise :class:`polyop.APIError`
subclasses (NotFound, AlreadyExists, Conflict, Invalid, Forbidden, ...); other
failures raise :class:`polyop.ClusterError`. A Cluster is safe to share
between threads.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from polyop._address import parse_address
from polyop.errors import ClusterError, from_rpc_error
from polyop.objects import GVK, KindLike, Object, encode
from polyop.reconcile import EventType
from polyop.v1alpha1 import cluster_pb2, cluster_pb2_grpc, reconcile_pb2, types_pb2

__all__ = [
    "ADDRESS_ENV",
    "TLS_CA_FILE_ENV",
    "TLS_CERT_FILE_ENV",
    "TLS_KEY_FILE_ENV",
    "Cluster",
    "ObjectList",
    "PatchType",
    "Propagation",
    "ReadSource",
    "ResolvedKind",
    "tls_credentials",
    "tls_credentials_from_env",
]

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

_T = TypeVar("_T")


class PatchType(enum.IntEnum):
    MERGE = cluster_pb2.PATCH_TYPE_MERGE
    """A JSON merge patch (RFC 7386)."""
    JSON = cluster_pb2.PATCH_TYPE_JSON
    """A JSON patch (RFC 6902): a list of operations."""
    STRATEGIC_MERGE = cluster_pb2.PATCH_TYPE_STRATEGIC_MERGE
    """A strategic merge patch; built-in kinds only."""
    APPLY = cluster_pb2.PATCH_TYPE_APPLY
    """Server-side apply; see :meth:`Cluster.apply`."""


class Propagation(enum.IntEnum):
    """What a delete does to the object's dependents."""

    BACKGROUND = cluster_pb2.DELETE_PROPAGATION_BACKGROUND
    FOREGROUND = cluster_pb2.DELETE_PROPAGATION_FOREGROUND
    ORPHAN = cluster_pb2.DELETE_PROPAGATION_ORPHAN


class ReadSource(enum.IntEnum):
    UNSPECIFIED = cluster_pb2.READ_SOURCE_UNSPECIFIED
    CACHE = cluster_pb2.READ_SOURCE_CACHE
    API_SERVER = cluster_pb2.READ_SOURCE_API_SERVER


@dataclass(frozen=True)
class ObjectList:
    """The objects a list selected; ``continue_token`` is empty on the last page."""

    items: list[Object]
    continue_token: str
    resource_version: str
    source: ReadSource


@dataclass(frozen=True)
class ResolvedKind:
    """How the API server serves a kind."""

    kind: GVK
    resource: str
    namespaced: bool


class Cluster:
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
        self.field_manager = field_manager
        self.timeout = timeout
        self._owns_channel = channel is None
        if channel is None:
            address = address or os.environ.get(ADDRESS_ENV, "")
            if not address:
                raise ClusterError(f"no Cluster service address: pass one or set {ADDRESS_ENV}")
            target = parse_address(address).grpc_target
            options = [
                ("grpc.max_send_message_length", max_message_size),
                ("grpc.max_receive_message_length", max_message_size),
            ]
            credentials = credentials or tls_credentials_from_env()
            if credentials is None:
                channel = grpc.insecure_channel(target, options=options)
            else:
                channel = grpc.secure_channel(target, credentials, options=options)
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

    def get(
        self, kind: KindLike, name: str, namespace: str = "", *, uncached: bool = False, subresource: str = ""
    ) -> Object:
        """Read one object; raises NotFound when it does not exist.

        With ``subresource`` (for example ``"scale"``), read that subresource of
        the object from the API server instead, such as an autoscaling/v1
        Scale; ``"status"`` is the object itself."""
        gvk = GVK.parse(kind)
        resp = self._call(
            f"getting {gvk.kind} {_key(namespace, name)}{_sub(subresource)}",
            self._stub.Get,
            cluster_pb2.GetRequest(
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                uncached=uncached,
                subresource=subresource,
            ),
        )
        return Object.from_json(resp.object)

    def list(
        self,
        kind: KindLike,
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
        gvk = GVK.parse(kind)
        resp = self._call(
            f"listing {gvk.kind}",
            self._stub.List,
            cluster_pb2.ListRequest(
                kind=gvk.to_proto(),
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=continue_token,
                uncached=uncached,
            ),
        )
        return ObjectList(
            items=[Object.from_json(item) for item in resp.items],
            continue_token=resp.continue_token,
            resource_version=resp.resource_version,
            source=ReadSource(resp.source),
        )

    def resolve_kind(self, kind: KindLike) -> ResolvedKind:
        """Map a kind to its resource and scope; a GVK with an empty version
        resolves the API server's preferred version."""
        gvk = GVK.parse(kind)
        resp = self._call(f"resolving {gvk}", self._stub.ResolveKind, cluster_pb2.ResolveKindRequest(kind=gvk.to_proto()))
        return ResolvedKind(GVK.from_proto(resp.kind), resp.resource, resp.namespaced)

    # Writes.

    def create(self, obj: Mapping[str, Any], *, dry_run: bool = False, field_manager: str = "") -> Object:
        """Create an object (with apiVersion and kind); returns it as stored."""
        resp = self._call(
            f"creating {_describe(obj)}",
            self._stub.Create,
            cluster_pb2.CreateRequest(object=encode(obj), options=self._write_options(dry_run, field_manager)),
        )
        return Object.from_json(resp.object)

    def create_subresource(
        self,
        kind: KindLike,
        name: str,
        namespace: str = "",
        *,
        subresource: str,
        body: Mapping[str, Any],
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object:
        """Create a subresource of an existing object, for example evict a Pod::

            cluster.create_subresource("v1/Pod", "web-0", "shop", subresource="eviction",
                                       body={"apiVersion": "policy/v1", "kind": "Eviction"})

        ``body`` is the subresource's object (an Eviction, a TokenRequest); its
        name and namespace default to the object's. Returns what the API
        server answered: a TokenRequest with its token, a Status for an
        eviction."""
        gvk = GVK.parse(kind)
        resp = self._call(
            f"creating {gvk.kind} {_key(namespace, name)}{_sub(subresource)}",
            self._stub.Create,
            cluster_pb2.CreateRequest(
                object=encode(body),
                options=self._write_options(dry_run, field_manager),
                subresource=subresource,
                parent_kind=gvk.to_proto(),
                parent_key=types_pb2.ObjectKey(namespace=namespace, name=name),
            ),
        )
        return Object.from_json(resp.object)

    def update(
        self, obj: Mapping[str, Any], *, subresource: str = "", dry_run: bool = False, field_manager: str = ""
    ) -> Object:
        """Replace an object, or its subresource (``subresource="status"``), with
        optimistic concurrency on metadata.resourceVersion: raises Conflict when
        the object changed since it was read."""
        resp = self._call(
            f"updating {_describe(obj)}",
            self._stub.Update,
            cluster_pb2.UpdateRequest(
                object=encode(obj), subresource=subresource, options=self._write_options(dry_run, field_manager)
            ),
        )
        return Object.from_json(resp.object)

    def patch(
        self,
        kind: KindLike,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]] | bytes,
        namespace: str = "",
        *,
        type: PatchType = PatchType.MERGE,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object:
        """Patch an object or its subresource: a merge patch by default, or a
        JSON patch (a list of operations), a strategic merge patch or an apply."""
        gvk = GVK.parse(kind)
        resp = self._call(
            f"patching {gvk.kind} {_key(namespace, name)}",
            self._stub.Patch,
            cluster_pb2.PatchRequest(
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                type=type.value,
                patch=patch if isinstance(patch, bytes) else encode(patch),
                subresource=subresource,
                force=force,
                options=self._write_options(dry_run, field_manager),
            ),
        )
        return Object.from_json(resp.object)

    def apply(
        self,
        obj: Mapping[str, Any],
        *,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "",
    ) -> Object:
        """Server-side apply: obj is the applied configuration, with apiVersion,
        kind, metadata.name (and namespace) and the fields the manager owns."""
        o = Object(obj)
        return self.patch(
            o.gvk, o.name, obj, o.namespace, type=PatchType.APPLY, subresource=subresource,
            force=force, dry_run=dry_run, field_manager=field_manager,
        )

    def delete(
        self,
        kind: KindLike,
        name: str,
        namespace: str = "",
        *,
        propagation: Propagation | None = None,
        precondition_uid: str = "",
        precondition_resource_version: str = "",
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        """Delete an object; raises NotFound when it does not exist."""
        gvk = GVK.parse(kind)
        req = cluster_pb2.DeleteRequest(
            kind=gvk.to_proto(),
            key=types_pb2.ObjectKey(namespace=namespace, name=name),
            propagation=propagation.value if propagation is not None else cluster_pb2.DELETE_PROPAGATION_UNSPECIFIED,
            precondition_uid=precondition_uid,
            precondition_resource_version=precondition_resource_version,
            options=cluster_pb2.WriteOptions(dry_run=dry_run),
        )
        if grace_period_seconds is not None:
            req.grace_period_seconds = grace_period_seconds
        self._call(f"deleting {gvk.kind} {_key(namespace, name)}", self._stub.Delete, req)

    def record_event(
        self,
        kind: KindLike,
        name: str,
        namespace: str = "",
        *,
        reason: str,
        message: str,
        type: EventType = "Normal",
        action: str = "",
    ) -> None:
        """Record a Kubernetes event on any object. (Inside a reconcile,
        ``ctx.event`` records on the reconciled object with no extra call.)"""
        gvk = GVK.parse(kind)
        event_type = reconcile_pb2.EVENT_TYPE_WARNING if type == "Warning" else reconcile_pb2.EVENT_TYPE_NORMAL
        self._call(
            f"recording an event on {gvk.kind} {_key(namespace, name)}",
            self._stub.RecordEvent,
            cluster_pb2.RecordEventRequest(
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                event=reconcile_pb2.Event(type=event_type, reason=reason, message=message, action=action),
            ),
        )

    # Plumbing.

    def _write_options(self, dry_run: bool, field_manager: str) -> cluster_pb2.WriteOptions:
        return cluster_pb2.WriteOptions(dry_run=dry_run, field_manager=field_manager or self.field_manager)

    def _call(self, what: str, method: Callable[..., _T], request: Any) -> _T:
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err, what) from err


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _sub(subresource: str) -> str:
    return f" ({subresource})" if subresource else ""


def _describe(obj: Mapping[str, Any]) -> str:
    o = Object(obj)
    return f"{o.kind} {_key(o.namespace, o.name)}"
