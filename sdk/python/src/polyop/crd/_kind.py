"""Declaring a kind: :func:`kind`, with its printer columns and scale subresource."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from polyop.crd._models import Resource
from polyop.objects import GVK

__all__ = ["KindInfo", "PrinterColumn", "Scale", "kind", "kind_info"]

_R = TypeVar("_R", bound=type[Resource])

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_VERSION = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")


@dataclass(frozen=True)
class PrinterColumn:
    """``+kubebuilder:printcolumn``: a column of ``kubectl get``.

    ``json_path`` is a JSONPath into the object (``.status.phase``); ``type`` one
    of integer, number, string, boolean, date; ``priority`` 0 shows it always,
    higher only with ``-o wide``."""

    name: str
    json_path: str
    type: Literal["integer", "number", "string", "boolean", "date"] = "string"
    description: str = ""
    format: str = ""
    priority: int = 0

    def to_dict(self) -> dict[str, object]:
        column: dict[str, object] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        if self.format:
            column["format"] = self.format
        if self.priority:
            column["priority"] = self.priority
        return column


@dataclass(frozen=True)
class Scale:
    """``+kubebuilder:subresource:scale``: the scale subresource, for ``kubectl
    scale`` and the HorizontalPodAutoscaler. The paths are JSON paths of the
    desired replicas (under .spec), the observed replicas (under .status) and,
    optionally, the label selector as a string (under .status)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str = ""

    def to_dict(self) -> dict[str, str]:
        scale = {"specReplicasPath": self.spec_replicas_path, "statusReplicasPath": self.status_replicas_path}
        if self.label_selector_path:
            scale["labelSelectorPath"] = self.label_selector_path
        return scale


@dataclass(frozen=True)
class KindInfo:
    """What :func:`kind` declared about a :class:`Resource` class."""

    model: type[Resource]
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: Literal["Namespaced", "Cluster"]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    served: bool = True
    storage: bool | None = None
    deprecated: bool = False
    deprecation_warning: str = ""
    status_subresource: bool = True
    scale: Scale | None = None
    printer_columns: tuple[PrinterColumn, ...] = field(default_factory=tuple)

    @property
    def gvk(self) -> GVK:
        return GVK(self.group, self.version, self.kind)

    @property
    def api_version(self) -> str:
        return self.gvk.api_version

    @property
    def crd_name(self) -> str:
        """The CRD's name, ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"


def kind(
    *,
    group: str,
    version: str,
    kind: str = "",
    plural: str = "",
    singular: str = "",
    scope: Literal["Namespaced", "Cluster"] = "Namespaced",
    short_names: Sequence[str] = (),
    categories: Sequence[str] = (),
    served: bool = True,
    storage: bool | None = None,
    deprecated: bool = False,
    deprecation_warning: str = "",
    status_subresource: bool | None = None,
    scale: Scale | None = None,
    printer_columns: Sequence[PrinterColumn] = (),
) -> Callable[[_R], _R]:
    """Declare a :class:`Resource` class as a kind at one version, what
    kubebuilder's ``+kubebuilder:resource``, ``+kubebuilder:subresource``,
    ``+kubebuilder:printcolumn`` and ``+kubebuilder:storageversion`` markers say.

    - ``kind`` defaults to the class's name; ``plural`` to the kind in lower
      case made plural as kubebuilder does (``widgets``, ``policies``,
      ``classes``), ``singular`` to the kind in lower case;
    - ``scope``: ``"Namespaced"`` (the default) or ``"Cluster"``;
    - ``short_names`` and ``categories`` for kubectl (``kubectl get all``
      lists the kinds of category ``all``);
    - ``served`` and ``storage``: declare each version of a kind with its own
      class (``kind=`` the same); exactly one is the storage version: the
      one with ``storage=True``, or else the only one that leaves ``storage``
      unsaid (the others ``storage=False``);
    - ``status_subresource``: defaults to True when the class has a ``status``
      field (the host writes the status through it);
    - ``scale``: a :class:`Scale` for the scale subresource;
    - ``printer_columns``: :class:`PrinterColumn` for ``kubectl get``.
    """

    def declare(cls: _R) -> _R:
        if not (isinstance(cls, type) and issubclass(cls, Resource)):
            raise TypeError(f"polyop.crd.kind: {cls!r} is not a subclass of polyop.crd.Resource")
        name = kind or cls.__name__
        where = f"{cls.__module__}.{cls.__qualname__}"
        if not _DNS1123_SUBDOMAIN.match(group) or "." not in group:
            raise ValueError(f"{where}: group {group!r} must be a DNS subdomain with a dot, e.g. example.com")
        if not _VERSION.match(version):
            raise ValueError(f"{where}: version {version!r} must be lower case, e.g. v1 or v1alpha1")
        if not _KIND.match(name):
            raise ValueError(f"{where}: kind {name!r} must be CamelCase, e.g. Widget")
        plural_name = plural or _plural(name.lower())
        singular_name = singular or name.lower()
        for label, value in (("plural", plural_name), ("singular", singular_name), *(("short name", s) for s in short_names), *(("category", c) for c in categories)):
            if not _DNS1123_LABEL.match(value):
                raise ValueError(f"{where}: {label} {value!r} must be lower case letters and digits")
        if scope not in ("Namespaced", "Cluster"):
            raise ValueError(f"{where}: scope is Namespaced or Cluster, not {scope!r}")
        has_status = "status" in cls.__pydantic_fields__
        if status_subresource and not has_status:
            raise ValueError(f"{where}: status_subresource=True needs a status field")
        cls.__polyop_kind__ = KindInfo(
            model=cls,
            group=group,
            version=version,
            kind=name,
            plural=plural_name,
            singular=singular_name,
            scope=scope,
            short_names=tuple(short_names),
            categories=tuple(categories),
            served=served,
            storage=storage,
            deprecated=deprecated,
            deprecation_warning=deprecation_warning,
            status_subresource=has_status if status_subresource is None else status_subresource,
            scale=scale,
            printer_columns=tuple(printer_columns),
        )
        return cls

    return declare


def kind_info(cls: type[Resource]) -> KindInfo:
    """What :func:`kind` declared about cls. Raises TypeError when it declared nothing."""
    info = cls.__dict__.get("__polyop_kind__")
    if not isinstance(info, KindInfo):
        raise TypeError(f"{cls.__qualname__} is not declared as a kind: decorate it with @polyop.crd.kind(group=..., version=...)")
    return info


def _plural(singular: str) -> str:
    # As kubebuilder (gengo's namer) makes plurals of kinds.
    if singular.endswith(("s", "x", "z", "ch", "sh")):
        return singular + "es"
    if singular.endswith("y") and singular[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return singular[:-1] + "ies"
    return singular + "s"
