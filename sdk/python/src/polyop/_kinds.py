"""A kind, however it is named, and a typed object as the API server's JSON.

Every registration and every Cluster call takes a kind the same ways
(:data:`KindRef`): a class that declares its kind (a
:class:`polyop.crd.Resource` declared with :func:`polyop.crd.kind`, or a
built-in kind of lightkube's models, such as
``lightkube.resources.apps_v1.Deployment``), a :class:`polyop.crd.KindInfo`, a
:class:`~polyop.GVK`, or its string ``"group/version/Kind"`` (``"v1/Kind"`` for
the core group). Objects are taken as mappings (a :class:`~polyop.Object`, a
``dict``) or as typed objects that give their JSON with ``to_dict()``: a
``polyop.crd`` model, a lightkube model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from polyop.crd import KindInfo, Resource, kind_info
from polyop.objects import GVK, KindLike

__all__ = ["KindRef", "ObjectLike", "SupportsToDict", "from_mapping", "gvk_of", "resolve_kind", "to_mapping"]

KindRef = KindLike | KindInfo | type
"""A kind: a class that declares it (a :class:`polyop.crd.Resource`, a lightkube
resource), a :class:`polyop.crd.KindInfo`, a :class:`~polyop.GVK` or
``"group/version/Kind"``."""


@runtime_checkable
class SupportsToDict(Protocol):
    """A typed object that gives its JSON, as ``polyop.crd`` and lightkube models do."""

    def to_dict(self) -> dict[str, Any]: ...


ObjectLike = Mapping[str, Any] | SupportsToDict
"""An object: a mapping of the API server's JSON (a :class:`~polyop.Object`, a
``dict``) or a typed object with ``to_dict()``."""

_T = TypeVar("_T")


def resolve_kind(kind: KindRef) -> tuple[GVK, type[Resource] | None]:
    """The GVK of a kind, and its model when it is a :class:`polyop.crd.Resource`
    class (or the KindInfo of one): the class a handler's object is parsed into."""
    if isinstance(kind, KindInfo):
        return kind.gvk, kind.model
    if isinstance(kind, type):
        if issubclass(kind, Resource):
            return kind_info(kind).gvk, kind
        return _declared_gvk(kind), None
    if isinstance(kind, (GVK, str)):
        return GVK.parse(kind), None
    raise TypeError(
        f"kind {kind!r}: want a class declared with polyop.crd.kind, a lightkube resource, "
        "a polyop.crd.KindInfo, a polyop.GVK or 'group/version/Kind'"
    )


def gvk_of(kind: KindRef) -> GVK:
    """The GVK of a kind, named any of the ways :data:`KindRef` allows."""
    return resolve_kind(kind)[0]


def to_mapping(obj: ObjectLike) -> Mapping[str, Any]:
    """obj as the API server's JSON: a mapping as it is, a typed object's ``to_dict()``."""
    if isinstance(obj, Mapping):
        return obj
    if isinstance(obj, SupportsToDict):
        value = obj.to_dict()
        if isinstance(value, Mapping):
            return value
    raise TypeError(f"{type(obj).__qualname__} is not an object: want a mapping or a typed object with to_dict()")


def from_mapping(cls: type[_T], obj: Mapping[str, Any]) -> _T:
    """obj read into a typed class: a :class:`polyop.crd.Resource` with its
    ``parse``, any other class (a lightkube model) with its ``from_dict``."""
    if issubclass(cls, Resource):
        parsed: Any = cls.parse(obj)
        return parsed  # type: ignore[no-any-return]
    from_dict = getattr(cls, "from_dict", None)
    if from_dict is None:
        raise TypeError(f"{cls.__qualname__} reads no object: it has no from_dict")
    result: _T = from_dict(dict(obj))
    return result


def _declared_gvk(cls: type) -> GVK:
    """The kind a class declares: lightkube's resources carry it in their API
    info (``lightkube.core.resource.api_info(cls).resource``)."""
    resource = getattr(getattr(cls, "_api_info", None), "resource", None)
    if resource is not None:
        return GVK(str(resource.group), str(resource.version), str(resource.kind))
    raise TypeError(
        f"{cls.__module__}.{cls.__qualname__} declares no kind: decorate a polyop.crd.Resource with "
        "@polyop.crd.kind, or use a lightkube resource (lightkube.resources.*)"
    )
