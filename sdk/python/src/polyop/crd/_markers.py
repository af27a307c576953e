"""Markers: what kubebuilder's ``// +kubebuilder:validation:...`` comments say,
written as ``typing.Annotated`` metadata on a field's type.

pydantic's own constraints (``Field(ge=, le=, gt=, lt=, multiple_of=,
min_length=, max_length=, pattern=)``, defaults, ``Literal``, ``Enum``) cover
the JSON Schema keywords; the markers here add what only Kubernetes knows::

    ports: Annotated[list[Port], ListMap("name", "protocol")] = []
    template: EmbeddedResource
    size: IntOrString = 1
    replicas: Int32 = 1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = [
    "EmbeddedResource",
    "Format",
    "Int32",
    "Int64",
    "IntOrString",
    "ListMap",
    "ListType",
    "MapType",
    "PreserveUnknownFields",
    "Unstructured",
    "Validation",
]


class _Marker:
    """Adds keys to the field's JSON Schema; the CRD generator reads them."""

    def _keys(self) -> dict[str, Any]:
        raise NotImplementedError

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = dict(handler(core_schema))
        for key, value in self._keys().items():
            if key == "x-kubernetes-validations":
                schema[key] = [*schema.get(key, []), *value]
            else:
                schema[key] = value
        return schema


@dataclass(frozen=True)
class ListType(_Marker):
    """``+listType``: how server-side apply merges a list. ``"atomic"`` (the
    whole list is one value, the default), ``"set"`` (items are unique
    scalars; ``set[X]`` and ``frozenset[X]`` say this by themselves) or
    ``"map"`` (use :class:`ListMap`)."""

    type: Literal["atomic", "set", "map"]

    def _keys(self) -> dict[str, Any]:
        return {"x-kubernetes-list-type": self.type}


class ListMap(_Marker):
    """``+listType=map`` with ``+listMapKey``: a list of objects identified by
    the keys, each a required (or defaulted) scalar field of the items, named
    as in JSON (camelCase)."""

    def __init__(self, *keys: str) -> None:
        if not keys:
            raise ValueError("ListMap: name at least one key")
        self.keys = keys

    def __repr__(self) -> str:
        return f"ListMap{self.keys!r}"

    def _keys(self) -> dict[str, Any]:
        return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(self.keys)}


@dataclass(frozen=True)
class MapType(_Marker):
    """``+mapType``: ``"granular"`` (the default: server-side apply merges the
    keys) or ``"atomic"`` (the map is one value)."""

    type: Literal["granular", "atomic"]

    def _keys(self) -> dict[str, Any]:
        return {"x-kubernetes-map-type": self.type}


@dataclass(frozen=True)
class Format(_Marker):
    """``+kubebuilder:validation:Format``: ``"int32"``, ``"int64"``,
    ``"date-time"``, ``"date"``, ``"byte"``, ``"uuid"``, ``"hostname"``,
    ``"ipv4"``, ``"cidr"``, ... (``datetime`` and ``date`` fields have theirs
    already)."""

    format: str

    def _keys(self) -> dict[str, Any]:
        return {"format": self.format}


@dataclass(frozen=True)
class PreserveUnknownFields(_Marker):
    """``+kubebuilder:pruning:PreserveUnknownFields``: the API server keeps
    fields the schema does not name. Needed for a value of any shape
    (``Any``, ``dict[str, Any]``); :data:`Unstructured` is such a field."""

    def _keys(self) -> dict[str, Any]:
        return {"x-kubernetes-preserve-unknown-fields": True}


@dataclass(frozen=True)
class _Embedded(_Marker):
    def _keys(self) -> dict[str, Any]:
        return {"x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True}


@dataclass(frozen=True)
class _IntOrString(_Marker):
    def _keys(self) -> dict[str, Any]:
        return {"x-kubernetes-int-or-string": True}


@dataclass(frozen=True)
class Validation(_Marker):
    """``+kubebuilder:validation:XValidation``: a CEL rule the API server checks
    (``self`` is the field's value, ``oldSelf`` the previous one), with the
    message it refuses with. Put it on a model's field to compare its fields::

        spec: Annotated[Spec, Validation("self.min <= self.max", "min must not exceed max")]
    """

    rule: str
    message: str = ""
    reason: str = ""
    field_path: str = ""

    def _keys(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"rule": self.rule}
        if self.message:
            rule["message"] = self.message
        if self.reason:
            rule["reason"] = self.reason
        if self.field_path:
            rule["fieldPath"] = self.field_path
        return {"x-kubernetes-validations": [rule]}


IntOrString = Annotated[int | str, _IntOrString()]
"""intstr.IntOrString: an integer or a string (``x-kubernetes-int-or-string``),
e.g. a port number or name, a count or a percentage."""

Int32 = Annotated[int, Format("int32")]
"""An integer with ``format: int32``, as Go's int32 gives."""

Int64 = Annotated[int, Format("int64")]
"""An integer with ``format: int64``, as Go's int64 gives."""

Unstructured = Annotated[dict[str, Any], PreserveUnknownFields()]
"""An object of any shape, kept as the user wrote it (runtime.RawExtension)."""

EmbeddedResource = Annotated[dict[str, Any], _Embedded()]
"""A whole Kubernetes object inside this one (``x-kubernetes-embedded-resource``):
apiVersion, kind and metadata are checked, the rest is kept as it is."""
