"""From a pydantic model's JSON Schema to a structural OpenAPI v3 schema, the
only kind apiextensions.k8s.io/v1 accepts.

pydantic writes JSON Schema 2020-12: ``$ref`` to ``$defs``, ``anyOf`` for
``Optional`` and unions, ``const``, numeric ``exclusiveMaximum``, titles. A
structural schema has a type at every node, no ``$ref``, no ``anyOf`` or
``oneOf`` that makes a node's type ambiguous, and no untyped value unless
the API server is told to keep it as it is. :func:`structural` inlines,
rewrites what has a Kubernetes equivalent, and raises :class:`SchemaError`,
naming the field, for what the API server would refuse.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["SchemaError", "structural"]

# JSONSchemaProps' fields (apiextensions.k8s.io/v1) that a generated schema may carry.
_KEPT = {
    "description",
    "type",
    "format",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "properties",
    "additionalProperties",
    "nullable",
    "anyOf",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
}
# JSON Schema keywords with no meaning for the API server, dropped.
_DROPPED = {"title", "examples", "deprecated", "readOnly", "writeOnly", "$schema", "$id", "$comment", "discriminator"}
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"
_LIST_TYPE = "x-kubernetes-list-type"
_LIST_MAP_KEYS = "x-kubernetes-list-map-keys"
_SCALARS = {"string", "integer", "number", "boolean"}


class SchemaError(ValueError):
    """A model the API server would refuse as a CRD schema. ``path`` is the
    field's JSON path from the object's root (``spec.template.ports[*].name``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


def structural(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """Return the structural OpenAPI v3 form of a pydantic JSON Schema (with its
    ``$defs``) for the field at path."""
    defs = schema.get("$defs", {})
    body = {k: v for k, v in schema.items() if k != "$defs"}
    return _Converter(defs).convert(body, path, (), "")


class _Converter:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def convert(self, node: dict[str, Any], path: str, refs: tuple[str, ...], model: str) -> dict[str, Any]:
        node, refs, model = self._inline(node, path, refs, model)
        if "anyOf" in node:
            node = self._union(node, _where(path, model))
            node, refs, model = self._inline(node, path, refs, model)
        where = _where(path, model)
        for key in _DROPPED:
            node.pop(key, None)
        if node.get("default", 0) is None:
            del node["default"]
        if "oneOf" in node or "allOf" in node or "not" in node or "if" in node:
            raise SchemaError(where, "a discriminated or intersected union (oneOf/allOf) is not a structural schema: give the field one type")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if isinstance(node.get("type"), list):
            types = [t for t in node["type"] if t != "null"]
            if len(types) != len(node["type"]):
                node["nullable"] = True
            if len(types) != 1:
                raise SchemaError(where, f"a value of several types ({', '.join(types)}) is not a structural schema: give it one type")
            node["type"] = types[0]
        for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
            if exclusive in node and not isinstance(node[exclusive], bool):
                limit = node.pop(exclusive)
                # gt=/lt= win over ge=/le= unless those are tighter.
                if bound not in node or (node[bound] >= limit if bound == "maximum" else node[bound] <= limit):
                    node[bound] = limit
                    node[exclusive] = True
        if node.get("format") == "binary":
            raise SchemaError(where, "bytes has no JSON form the API server knows: use str with crd.Format('byte') (base64)")
        if node.get("format") == "duration":
            raise SchemaError(where, "timedelta is written as ISO 8601 (PT1H), which the API server's duration format refuses: use str ('1h30m')")
        unique = node.pop("uniqueItems", False)
        if unique and node.get(_LIST_TYPE, "set") != "set":
            raise SchemaError(where, f"a set (unique items) cannot be list type {node[_LIST_TYPE]}")
        if unique:
            node[_LIST_TYPE] = "set"
        preserve = node.get(_PRESERVE) is True
        if node.get(_INT_OR_STRING):
            node.pop("type", None)
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        elif "type" not in node:
            if "properties" in node or "additionalProperties" in node:
                node["type"] = "object"
            elif "enum" in node:
                node["type"] = _enum_type(node["enum"], where)
            elif not preserve:
                raise SchemaError(
                    where,
                    "has no type (typing.Any, or a value of any shape), which a structural schema refuses: "
                    "give it a type, or mark it Annotated[..., crd.PreserveUnknownFields()] (crd.Unstructured for an object)",
                )
        if node.get("type") == "null":
            raise SchemaError(where, "None is its only value: give it a type")
        kind = node.get("type")
        if kind == "object":
            self._object(node, path, where, refs, model, preserve)
        elif kind == "array":
            self._array(node, path, where, refs, model)
        if "pattern" in node and _NOT_RE2.search(node["pattern"]):
            raise SchemaError(
                where,
                f"pattern {node['pattern']!r} uses a lookaround or a backreference, which the API server's regular expressions (RE2) do not have",
            )
        if "default" in node:
            _check_default(node, node["default"], where)
        for key in list(node):
            if key not in _KEPT:
                raise SchemaError(where, f"JSON Schema keyword {key!r} has no CRD equivalent")
        # Keywords in alphabetical order, as controller-gen writes them; properties keep the model's order.
        return {key: node[key] for key in sorted(node)}

    def _inline(
        self, node: dict[str, Any], path: str, refs: tuple[str, ...], model: str
    ) -> tuple[dict[str, Any], tuple[str, ...], str]:
        """Replace $ref (and a one-item allOf of a $ref) by the definition,
        keeping the field's own keys (its description, default, markers)."""
        node = dict(node)
        while True:
            if "allOf" in node and len(node["allOf"]) == 1:
                (inner,) = node.pop("allOf")
                node = {**inner, **node}
            if "$ref" not in node:
                return node, refs, model
            name = node.pop("$ref").rsplit("/", 1)[-1]
            if name in refs:
                raise SchemaError(
                    _where(path, model),
                    f"{name} contains itself: a CRD schema cannot be recursive; "
                    "type the field Annotated[dict[str, Any], crd.PreserveUnknownFields()] (crd.Unstructured) to keep it as it is",
                )
            refs, model = (*refs, name), name
            node = {**self.defs[name], **node}

    def _union(self, node: dict[str, Any], where: str) -> dict[str, Any]:
        branches = node.pop("anyOf")
        nullable = any(b == {"type": "null"} for b in branches)
        others = [b for b in branches if b != {"type": "null"}]
        if nullable:
            node["nullable"] = True
        types = sorted(str(b.get("type", b.get("$ref", "?"))).rsplit("/", 1)[-1] for b in others)
        if types == ["integer", "string"] and all(set(b) == {"type"} for b in others):
            node[_INT_OR_STRING] = True
            return node
        if len(others) == 1:
            # Optional[X]: X, nullable, with the field's own keys.
            return {**others[0], **node}
        raise SchemaError(
            where,
            f"a union of {' and '.join(types)} is not a structural schema: give the field one type "
            "(int | str is crd.IntOrString, X | None is a nullable X)",
        )

    def _object(self, node: dict[str, Any], path: str, where: str, refs: tuple[str, ...], model: str, preserve: bool) -> None:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if extra is True or extra == {}:
            if not preserve:
                raise SchemaError(
                    where,
                    "a map of values of any shape (dict[str, Any], or a model with extra='allow') is not a structural schema: "
                    "give the values a type, or mark it Annotated[..., crd.PreserveUnknownFields()] (crd.Unstructured)",
                )
            del node["additionalProperties"]
        elif extra is False:
            del node["additionalProperties"]
        elif isinstance(extra, dict):
            if properties:
                raise SchemaError(where, "an object cannot have both named fields and a map of other keys")
            node["additionalProperties"] = self.convert(extra, f"{path}[*]", refs, model)
        if properties is not None:
            node["properties"] = {
                name: self.convert(value, f"{path}.{name}" if path else name, refs, model) for name, value in properties.items()
            }
            if not node["properties"]:
                del node["properties"]
        if "required" in node and not node["required"]:
            del node["required"]

    def _array(self, node: dict[str, Any], path: str, where: str, refs: tuple[str, ...], model: str) -> None:
        if "prefixItems" in node:
            raise SchemaError(where, "a tuple is not a structural schema: use a list of one type, or a model")
        if "items" not in node:
            raise SchemaError(where, "a list of values of any shape is not a structural schema: give the items a type")
        items = self.convert(node["items"], f"{path}[*]", refs, model)
        node["items"] = items
        list_type = node.get(_LIST_TYPE)
        if list_type == "set" and items.get("type") not in _SCALARS:
            raise SchemaError(where, "a set's items must be scalars (str, int, float, bool): use crd.ListMap(keys) for objects")
        if list_type == "map":
            if items.get("type") != "object":
                raise SchemaError(where, "a list map's items must be objects (models)")
            props = items.get("properties", {})
            required = set(items.get("required", ()))
            for key in node.get(_LIST_MAP_KEYS, ()):
                if key not in props:
                    raise SchemaError(where, f"list map key {key!r} is not a field of the items (name it as in JSON: camelCase)")
                if props[key].get("type") not in _SCALARS:
                    raise SchemaError(where, f"list map key {key!r} must be a scalar")
                if key not in required and "default" not in props[key]:
                    raise SchemaError(where, f"list map key {key!r} must be required or have a default")
        elif _LIST_MAP_KEYS in node:
            raise SchemaError(where, "list map keys need list type map: use crd.ListMap(keys)")


# Python's regular expressions have these; Go's RE2, which the API server uses, does not.
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=")


def _check_default(node: dict[str, Any], value: Any, where: str) -> None:
    """Refuse a default the node's own constraints refuse: the API server refuses the CRD."""

    def refuse(why: str) -> None:
        raise SchemaError(where, f"the default {value!r} {why}, and the API server refuses a CRD whose default is invalid")

    if "enum" in node and value not in node["enum"]:
        refuse(f"is not one of {node['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "maximum" in node and (value >= node["maximum"] if node.get("exclusiveMaximum") else value > node["maximum"]):
            refuse(f"is above the maximum {node['maximum']}")
        if "minimum" in node and (value <= node["minimum"] if node.get("exclusiveMinimum") else value < node["minimum"]):
            refuse(f"is below the minimum {node['minimum']}")
        if "multipleOf" in node and value % node["multipleOf"]:
            refuse(f"is not a multiple of {node['multipleOf']}")
    if isinstance(value, str):
        if len(value) < node.get("minLength", 0) or len(value) > node.get("maxLength", len(value)):
            refuse("has a length out of minLength/maxLength")
        if "pattern" in node and not re.search(node["pattern"], value):
            refuse(f"does not match the pattern {node['pattern']!r}")
    if isinstance(value, list) and (len(value) < node.get("minItems", 0) or len(value) > node.get("maxItems", len(value))):
        refuse("has a number of items out of minItems/maxItems")


def _where(path: str, model: str) -> str:
    return f"{path} (in {model})" if model else path


def _enum_type(values: list[Any], where: str) -> str:
    kinds = {"string" if isinstance(v, str) else "boolean" if isinstance(v, bool) else "integer" if isinstance(v, int) else "number" if isinstance(v, float) else "?" for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) != 1 or "?" in kinds:
        raise SchemaError(where, "an enum of values of several types is not a structural schema")
    return kinds.pop()
