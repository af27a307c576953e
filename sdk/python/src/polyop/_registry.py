"""The registry: what a sidecar's functions handle, and the Describe answer built from it.

Each decorator records what the function handles and how; the answer to the
host's Describe is built from these registrations and nothing else. Every
decorator returns the function unchanged, so it can still be called directly
in a test. The registry knows nothing of how it is served: dispatch
(:mod:`polyop._calls`) calls its functions, and serving
(:mod:`polyop._serving`) runs ``serve(registry, options)``.
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from typing_extensions import deprecated

from polyop._fieldpath import compile_path
from polyop._kinds import KindRef, resolve_kind
from polyop._typed import admission_function, is_async, typed_reconcile
from polyop._version import SDK_NAME, __version__
from polyop.admission import AdmissionRequest, FailurePolicy, Operation
from polyop.cluster import OWNER_UID_INDEX
from polyop.crd import Resource
from polyop.objects import GVK, Object
from polyop.reconcile import (
    AsyncContext,
    Context,
    Owns,
    Request,
    Result,
    UpdateFilter,
    Watch,
)
from polyop.v1alpha1 import admission_pb2, describe_pb2, types_pb2

__all__ = [
    "OWNER_UID_INDEX",
    "PROTOCOL_VERSION",
    "ConvertFunc",
    "Controller",
    "Converter",
    "DefaultFunc",
    "DeletedFunc",
    "FinalizeFunc",
    "ReconcileFunc",
    "Registry",
    "TypedReconcileFunc",
    "ValidateFunc",
    "Webhook",
    "is_async",
]

PROTOCOL_VERSION = describe_pb2.PROTOCOL_VERSION_V1ALPHA1

"""The polyop protocol version this SDK speaks, the proto's ProtocolVersion."""

ReconcileFunc = Callable[[Object, Context], Result | None] | Callable[[Object, AsyncContext], Awaitable[Result | None]]
"""``reconcile(obj, ctx) -> Result | None``, or ``async def``."""
TypedReconcileFunc = Callable[[Any, Context], Result | None] | Callable[[Any, AsyncContext], Awaitable[Result | None]]
"""``reconcile(typed, ctx) -> Result | None``, or ``async def``, for a kind
declared as a :class:`polyop.crd.Resource`: ``typed`` is an instance of it."""
FinalizeFunc = ReconcileFunc
"""``finalize(obj, ctx) -> Result | None``, or ``async def``: clean-up done
unless it raises or asks for ``requeue_after``."""
DeletedFunc = Callable[[Request, Context], Result | None] | Callable[[Request, AsyncContext], Awaitable[Result | None]]
"""``deleted(request, ctx) -> Result | None``, or ``async def``: the object
``request`` names is gone."""
DefaultFunc = (
    Callable[[Any, AdmissionRequest], Sequence[str] | None]
    | Callable[[Any, AdmissionRequest], Awaitable[Sequence[str] | None]]
)
"""``default(obj, req) -> warnings | None``, or ``async def``: set the defaults on obj in place."""
ValidateFunc = (
    Callable[[Any, AdmissionRequest], Sequence[str] | None]
    | Callable[[Any, AdmissionRequest], Awaitable[Sequence[str] | None]]
    | Callable[[AdmissionRequest], Sequence[str] | None]
    | Callable[[AdmissionRequest], Awaitable[Sequence[str] | None]]
)
"""``validate(obj, req) -> warnings | None``, or ``async def``: raise DeniedError
to refuse. (``validate(req)`` is the deprecated shape.)"""
ConvertFunc = Callable[[Object, str], Mapping[str, Any]] | Callable[[Object, str], Awaitable[Mapping[str, Any]]]
"""``convert(obj, api_version) -> the object at api_version``, or ``async def``."""

AdmissionCall = Callable[[Object, AdmissionRequest], Any]
"""A defaulter or validator as dispatch calls it (see :func:`polyop._typed.admission_function`)."""

_R = TypeVar("_R", bound=ReconcileFunc | TypedReconcileFunc)
_X = TypeVar("_X", bound=DeletedFunc)
_D = TypeVar("_D", bound=DefaultFunc)
_V = TypeVar("_V", bound=ValidateFunc)
_C = TypeVar("_C", bound=ConvertFunc)

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass
class Controller:
    description: describe_pb2.ControllerDescription
    kind: GVK
    owns: frozenset[GVK]
    reconcile: ReconcileFunc
    model: type[Resource] | None = None
    finalize: FinalizeFunc | None = None
    deleted: DeletedFunc | None = None


@dataclass
class Webhook:
    kind: GVK
    resource: str = ""
    operations: tuple[Operation, ...] = ()
    failure_policy: FailurePolicy | None = None
    timeout_seconds: int = 0
    default: AdmissionCall | None = None
    """The defaulter, as dispatch calls it: ``(obj, req)`` with obj an Object."""
    validate: AdmissionCall | None = None
    """The validator, as dispatch calls it: ``(obj, req)`` with obj an Object."""

    def description(self) -> admission_pb2.WebhookDescription:
        return admission_pb2.WebhookDescription(
            kind=self.kind.to_proto(),
            resource=self.resource,
            default=self.default is not None,
            validate=self.validate is not None,
            operations=[op.value for op in self.operations],
            failure_policy=self.failure_policy.value if self.failure_policy else admission_pb2.FAILURE_POLICY_UNSPECIFIED,
            timeout_seconds=self.timeout_seconds,
        )


@dataclass
class Converter:
    group: str
    kind: str
    versions: tuple[str, ...]
    convert: ConvertFunc
    description: admission_pb2.ConversionDescription = field(init=False)

    def __post_init__(self) -> None:
        self.description = admission_pb2.ConversionDescription(
            kind=types_pb2.GroupKind(group=self.group, kind=self.kind), versions=self.versions
        )


class Registry:
    """What a sidecar's functions handle: the registrations, and the Describe
    answer built from them. :class:`polyop.Sidecar` is a Registry that serves
    itself.

    ``name`` is a short name for the sidecar (lower-case letters, digits and
    '-'), used in the host's logs, metrics and leader election lease.
    """

    def __init__(self, name: str, *, logger: logging.Logger | None = None) -> None:
        if not _DNS1123_LABEL.match(name) or len(name) > 63:
            raise ValueError(f"sidecar name {name!r}: lower-case letters, digits and '-', at most 63")
        self.name = name
        self.log = logger or logging.getLogger("polyop")
        self._lock = threading.Lock()
        self._serving = False
        self._controllers: dict[str, Controller] = {}
        self._webhooks: dict[GVK, Webhook] = {}
        self._converters: dict[tuple[str, str], Converter] = {}
        self._indexes: dict[tuple[str, str, str], describe_pb2.IndexDescription] = {}
        self._cached_kinds: dict[tuple[str, str], describe_pb2.CachedKind] = {}

    # Registration.

    def reconciler(
        self,
        kind: KindRef,
        *,
        name: str = "",
        owns: Iterable[KindRef | Owns] = (),
        watches: Iterable[Watch] = (),
        update_filters: Iterable[UpdateFilter] = (),
        label_selector: str = "",
        namespaces: Iterable[str] = (),
        max_concurrent_reconciles: int = 0,
        finalizer: str = "",
        skip_unchanged_inputs: bool = False,
    ) -> Callable[[_R], _R]:
        """Register a reconcile function for a kind, as
        ``ctrl.NewControllerManagedBy(mgr).For(kind)`` does in controller-runtime.

        - ``name``: the controller's name, unique in the sidecar; defaults to
          the kind in lower case;
        - ``owns``: the kinds of its children (``Owns(kind, send_observed=True)``
          to receive them in ``ctx.observed_children(kind)``);
        - ``watches``: other kinds whose events enqueue reconciled objects;
        - ``update_filters``: update events reconcile only when one of these
          changed (every update does by default);
        - ``label_selector``: only objects it selects are watched;
        - ``namespaces``: only these namespaces (all by default);
        - ``max_concurrent_reconciles``: objects reconciled at once (1 by default);
        - ``finalizer``: a finalizer the host adds to every object; register the
          clean-up with :meth:`finalizer`;
        - ``skip_unchanged_inputs``: declares that the function's answer depends
          on its inputs alone — the object without its status (and without
          ``metadata.resourceVersion`` and ``metadata.managedFields``) and the
          observed children sent (``send_observed``), status included — so the
          host skips a call whose inputs are those of the last answer that
          succeeded without ``requeue_after``, such as the call its own status
          write or child apply would cause. Leave it off (the default) for a
          function that reads the clock, other objects or anything outside the
          cluster.

        The function may be ``async def``; register what to do once an object
        is gone with :meth:`deleted`.

        With ``kind`` a class declared with :func:`polyop.crd.kind`, the
        function receives the object as an instance of it, and the instance's
        status is what the host writes; an object that does not fit the class
        is a terminal error naming its fields.
        """
        gvk, model = resolve_kind(kind)
        controller_name = name or gvk.kind.lower()
        if not _DNS1123_SUBDOMAIN.match(controller_name) or len(controller_name) > 253:
            raise ValueError(f"controller name {controller_name!r}: lower-case letters, digits, '-' and '.'")
        owned = [o if isinstance(o, Owns) else Owns(o) for o in owns]
        owned_kinds = frozenset(resolve_kind(o.kind)[0] for o in owned)
        filters = [UpdateFilter(f) for f in update_filters]
        namespace_list: list[str] = []
        for ns in namespaces:
            if not _DNS1123_LABEL.match(ns):
                raise ValueError(f"controller {controller_name!r}: namespace {ns!r} is not a valid name")
            if ns not in namespace_list:
                namespace_list.append(ns)
        if not 0 <= max_concurrent_reconciles < 2**31:
            raise ValueError(f"controller {controller_name!r}: max_concurrent_reconciles must be between 0 and 2^31-1")
        description = describe_pb2.ControllerDescription(
            name=controller_name,
            for_kind=gvk.to_proto(),
            namespaces=namespace_list,
            max_concurrent_reconciles=max_concurrent_reconciles,
            owns=[o.to_proto() for o in owned],
            watches=[w.to_proto() for w in watches],
            finalizer=finalizer,
            skip_unchanged_inputs=skip_unchanged_inputs,
        )
        if filters or label_selector:
            description.predicates.CopyFrom(
                describe_pb2.Predicates(update_filters=list(dict.fromkeys(f.value for f in filters)), label_selector=label_selector)
            )

        def register(fn: _R) -> _R:
            with self._registering():
                if controller_name in self._controllers:
                    raise ValueError(f"controller {controller_name!r} is already registered: give each a unique name=")
                self._controllers[controller_name] = Controller(
                    description=description,
                    kind=gvk,
                    owns=owned_kinds,
                    reconcile=typed_reconcile(model, fn),
                    model=model,
                )
            return fn

        return register

    def finalizer(self, kind: KindRef | None = None, *, controller: str = "") -> Callable[[_R], _R]:
        """Register the clean-up of a controller that declares a ``finalizer``,
        named by its ``kind`` (for the controller of the default name) or its
        ``controller`` name. The host calls it for an object being deleted and
        removes the finalizer once it returns without error or requeue. It
        receives the object as the controller's reconciler does: typed when
        that was registered with a :class:`polyop.crd.Resource` class."""
        controller_name = self._controller_name("finalizer", kind, controller)

        def register(fn: _R) -> _R:
            with self._registering():
                c = self._registered_controller("finalizer", controller_name)
                if not c.description.finalizer:
                    raise ValueError(f"finalizer: controller {controller_name!r} declares no finalizer=")
                if c.finalize is not None:
                    raise ValueError(f"finalizer: controller {controller_name!r} already has one")
                c.finalize = typed_reconcile(c.model, fn)
            return fn

        return register

    def deleted(self, kind: KindRef | None = None, *, controller: str = "") -> Callable[[_X], _X]:
        """Register what a controller does once an object is gone, named as
        for :meth:`finalizer`: the host reconciles a key whose object no
        longer exists, and the function gets the :class:`~polyop.Request`
        (its key) and the context, ``deleted(request, ctx) -> Result | None``.
        Without one, such a call answers that there is nothing to do.

        Use it to forget what you keep outside the cluster about the object;
        to act before the object goes, declare a ``finalizer``. Status and
        events are ignored, since there is no object to write them to; a
        failure is retried as a reconcile's is."""
        controller_name = self._controller_name("deleted", kind, controller)

        def register(fn: _X) -> _X:
            with self._registering():
                c = self._registered_controller("deleted", controller_name)
                if c.deleted is not None:
                    raise ValueError(f"deleted: controller {controller_name!r} already has one")
                c.deleted = fn
            return fn

        return register

    def defaulter(
        self,
        kind: KindRef,
        *,
        resource: str = "",
        operations: Iterable[Operation] = (),
        failure_policy: FailurePolicy | None = None,
        timeout_seconds: int = 0,
    ) -> Callable[[_D], _D]:
        """Register a mutating admission webhook for a kind at one version:
        ``default(obj, req)`` sets defaults on the object in place and may
        return warnings (or give them with ``req.warn``).

        With ``kind`` a :class:`polyop.crd.Resource` class, ``obj`` is an
        instance of it and its changes are merged into the object; an object
        the class cannot read is denied with one field error per problem.
        ``operations`` default to create and update; ``failure_policy`` to
        FAIL; ``timeout_seconds`` (1 to 30) to 10. A defaulter and a validator
        of one kind share these settings. ``resource`` (the plural) is
        resolved through discovery when empty.
        """
        gvk, model = resolve_kind(kind)

        def register(fn: _D) -> _D:
            call = admission_function(f"defaulter of {gvk}", model, fn, defaulting=True)
            with self._registering():
                webhook = self._webhook(gvk, resource, operations, failure_policy, timeout_seconds)
                if webhook.default is not None:
                    raise ValueError(f"defaulter: {webhook.kind} already has one")
                webhook.default = call
            return fn

        return register

    def validator(
        self,
        kind: KindRef,
        *,
        resource: str = "",
        operations: Iterable[Operation] = (),
        failure_policy: FailurePolicy | None = None,
        timeout_seconds: int = 0,
    ) -> Callable[[_V], _V]:
        """Register a validating admission webhook for a kind at one version:
        ``validate(obj, req)`` raises DeniedError to refuse a request and may
        return warnings (or give them with ``req.warn``). ``obj`` is the
        object under admission, the old object on delete, typed as for
        :meth:`defaulter`, whose settings these are.
        """
        gvk, model = resolve_kind(kind)

        def register(fn: _V) -> _V:
            call = admission_function(f"validator of {gvk}", model, fn, defaulting=False)
            with self._registering():
                webhook = self._webhook(gvk, resource, operations, failure_policy, timeout_seconds)
                if webhook.validate is not None:
                    raise ValueError(f"validator: {webhook.kind} already has one")
                webhook.validate = call
            return fn

        return register

    @overload
    def converter(self, kind: KindRef, versions: Sequence[str], /) -> Callable[[_C], _C]: ...
    @overload
    @deprecated("converter(group, kind, versions) is deprecated: use converter(kind, versions)")
    def converter(self, group: str, kind: str, versions: Sequence[str], /) -> Callable[[_C], _C]: ...
    def converter(self, *args: Any) -> Callable[[_C], _C]:
        """Register the conversion of a kind between its versions (a CRD
        conversion webhook), ``converter(kind, versions)``: the kind named any
        way a registration takes it (its version does not matter: every
        version of the kind is converted), and at least two versions. The
        function returns the object at the apiVersion asked for, its metadata
        unchanged but for labels and annotations. The host calls it only with
        objects of the kind; it may be ``async def``.

        ``converter(group, kind, versions)`` is the deprecated shape."""
        if len(args) == 3:
            warnings.warn(
                "converter(group, kind, versions) is deprecated: use converter(kind, versions), "
                "with the kind as a model class, a KindInfo or 'group/version/Kind'",
                DeprecationWarning,
                stacklevel=2,
            )
            group, name, versions = args
        elif len(args) == 2:
            gvk = resolve_kind(args[0])[0]
            group, name, versions = gvk.group, gvk.kind, args[1]
        else:
            raise TypeError(f"converter takes (kind, versions), got {len(args)} arguments")
        if isinstance(versions, str) or len(versions) < 2:
            raise ValueError(f"converter {group}/{name}: name at least two versions")

        def register(fn: _C) -> _C:
            with self._registering():
                if (group, name) in self._converters:
                    raise ValueError(f"converter: {group}/{name} already has one")
                self._converters[(group, name)] = Converter(group, name, tuple(versions), fn)
            return fn

        return register

    def index(self, kind: KindRef, name: str, *, field_path: str = "", cel: str = "", path: str = "") -> None:
        """Declare a cache index the host keeps on kind, the declarative form
        of controller-runtime's ``IndexField``: ``cluster.list(kind,
        field_selector=f"{name}={value}")`` is then answered from the host's
        cache with the objects indexed under value. The values are those at
        a ``field_path`` (``".spec.nodeName"``,
        ``".metadata.ownerReferences[?(@.controller==true)].name"``) or the
        string, or list of strings, a ``cel`` expression over ``object``
        returns; exactly one is given. The host compiles both at start and
        stops, naming the index, if one does not compile. The kind is cached
        in every namespace the host watches (see :meth:`cache_kind`).
        ``path=`` is the deprecated name of ``field_path=``.
        """
        gvk, _ = resolve_kind(kind)
        if path:
            warnings.warn("index(path=...) is deprecated: use index(field_path=...)", DeprecationWarning, stacklevel=2)
            if field_path:
                raise ValueError(f"index {name!r} on {gvk.kind}: give field_path= (path= is its deprecated name), not both")
            field_path = path
        if not name or any(c in name for c in "=!, "):
            raise ValueError(f"index {name!r} on {gvk.kind}: a name is required, without '=', '!', ',' or spaces")
        if name == OWNER_UID_INDEX:
            raise ValueError(f"index {name!r} on {gvk.kind}: the host keeps this index itself on every owned kind; choose another name")
        if bool(field_path) == bool(cel):
            raise ValueError(f"index {name!r} on {gvk.kind}: give field_path= or cel=, one of them")
        if field_path:
            compile_path(field_path)  # a ValueError now rather than at the host's start
        description = describe_pb2.IndexDescription(kind=gvk.to_proto(), name=name)
        if field_path:
            description.field_path = field_path
        else:
            description.cel = cel
        with self._registering():
            key = (gvk.group, gvk.kind, name)
            if key in self._indexes:
                raise ValueError(f"index {name!r} on {gvk.kind} is already declared")
            self._indexes[key] = description

    def cache_kind(
        self,
        kind: KindRef,
        *,
        namespaces: Iterable[str] = (),
        label_selector: str = "",
        field_selector: str = "",
    ) -> None:
        """Declare kind for cached reads: the host starts an informer for it at
        start, and reads of it through ``ctx.cluster`` come from its cache,
        with no controller and no event mapping. ``namespaces`` (every
        namespace the host watches by default), ``label_selector`` and
        ``field_selector`` select what is cached. A read outside the cached
        namespaces fails with FAILED_PRECONDITION unless it passes
        ``uncached=True``. A kind a controller reconciles, owns or watches is
        cached anyway; declaring it may then take no selectors.
        """
        gvk, _ = resolve_kind(kind)
        for ns in namespaces:
            if not _DNS1123_LABEL.match(ns):
                raise ValueError(f"cached kind {gvk.kind}: namespace {ns!r} is not a valid name")
        description = describe_pb2.CachedKind(
            kind=gvk.to_proto(), namespaces=list(dict.fromkeys(namespaces)), label_selector=label_selector, field_selector=field_selector
        )
        with self._registering():
            if (gvk.group, gvk.kind) in self._cached_kinds:
                raise ValueError(f"cached kind {gvk.kind} is already declared")
            self._cached_kinds[(gvk.group, gvk.kind)] = description

    # Description.

    def describe(self) -> describe_pb2.DescribeResponse:
        """The answer to the host's Describe, built from the registrations."""
        self._check()
        with self._lock:
            return describe_pb2.DescribeResponse(
                protocol_version=PROTOCOL_VERSION,
                name=self.name,
                controllers=[c.description for c in self._controllers.values()],
                webhooks=[w.description() for w in self._webhooks.values()],
                conversions=[c.description for c in self._converters.values()],
                indexes=list(self._indexes.values()),
                cached_kinds=list(self._cached_kinds.values()),
                sdk_name=SDK_NAME,
                sdk_version=__version__,
            )

    def has_async_handlers(self) -> bool:
        """Whether any registered function is ``async def``."""
        with self._lock:
            fns: list[Callable[..., Any] | None] = []
            for c in self._controllers.values():
                fns += [c.reconcile, c.finalize, c.deleted]
            for w in self._webhooks.values():
                fns += [w.default, w.validate]
            fns += [c.convert for c in self._converters.values()]
        return any(fn is not None and is_async(fn) for fn in fns)

    # Internals.

    def _registering(self) -> _Registering:
        return _Registering(self)

    def _webhook(
        self,
        gvk: GVK,
        resource: str,
        operations: Iterable[Operation],
        failure_policy: FailurePolicy | None,
        timeout_seconds: int,
    ) -> Webhook:
        if timeout_seconds and not 1 <= timeout_seconds <= 30:
            raise ValueError(f"webhook {gvk}: timeout_seconds must be between 1 and 30")
        settings = Webhook(gvk, resource, tuple(dict.fromkeys(Operation(o) for o in operations)), failure_policy, timeout_seconds)
        webhook = self._webhooks.get(gvk)
        if webhook is None:
            self._webhooks[gvk] = settings
            return settings
        for attr in ("resource", "operations", "failure_policy", "timeout_seconds"):
            mine, theirs = getattr(settings, attr), getattr(webhook, attr)
            if mine and theirs and mine != theirs:
                raise ValueError(f"webhook {gvk}: the defaulter and the validator disagree on {attr} ({theirs!r} and {mine!r})")
            if mine:
                setattr(webhook, attr, mine)
        return webhook

    def _controller_name(self, decorator: str, kind: KindRef | None, controller: str) -> str:
        if (kind is None) == (not controller):
            raise ValueError(f"{decorator}: name the controller by kind or by controller=, not both")
        return controller or resolve_kind(kind or "")[0].kind.lower()

    def _registered_controller(self, decorator: str, name: str) -> Controller:
        c = self._controllers.get(name)
        if c is None:
            raise ValueError(f"{decorator}: no controller {name!r}; register its reconciler first")
        return c

    def _check(self) -> None:
        with self._lock:
            if not (self._controllers or self._webhooks or self._converters):
                raise ValueError(f"sidecar {self.name!r} registers nothing: register a reconciler, a webhook or a converter")
            for c in self._controllers.values():
                if c.description.finalizer and c.finalize is None:
                    raise ValueError(
                        f"controller {c.description.name!r} declares finalizer {c.description.finalizer!r} "
                        "but registers no clean-up: add one with @sidecar.finalizer"
                    )

    def _start_serving(self) -> None:
        self._check()
        with self._lock:
            if self._serving:
                raise RuntimeError(f"sidecar {self.name!r} is already serving")
            self._serving = True

    def _stopped_serving(self) -> None:
        with self._lock:
            self._serving = False


class _Registering:
    """Holds the registry's lock during a registration, which must happen before it is served."""

    def __init__(self, sidecar: Registry) -> None:
        self.sidecar = sidecar

    def __enter__(self) -> None:
        self.sidecar._lock.acquire()
        if self.sidecar._serving:
            self.sidecar._lock.release()
            raise RuntimeError("register every function before serving: the host reads them once, at start")

    def __exit__(self, *_: object) -> None:
        self.sidecar._lock.release()
