"""Assembling CustomResourceDefinitions (apiextensions.k8s.io/v1) from declared kinds."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from polyop.crd._kind import KindInfo, kind_info
from polyop.crd._models import Resource
from polyop.crd._schema import SchemaError, structural

__all__ = ["build_crd", "build_crds", "find_kinds", "schema_of", "to_yaml", "write_crds"]

_ROOT_FIELDS = {
    "apiVersion": {
        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should "
        "convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
        "type": "string",
    },
    "kind": {
        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer "
        "this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        "type": "string",
    },
    "metadata": {"type": "object"},
}


def schema_of(model: type[Resource]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a kind's objects (``openAPIV3Schema``).

    Raises :class:`SchemaError`, naming the field, for a model the API server
    would refuse; the message begins with the kind."""
    info = kind_info(model)
    raw = model.model_json_schema(by_alias=True, mode="validation")
    properties = {k: v for k, v in raw.get("properties", {}).items() if k not in _ROOT_FIELDS}
    required = [r for r in raw.get("required", []) if r not in _ROOT_FIELDS]
    body = {**raw, "properties": properties, "required": required}
    try:
        schema = structural(body, "")
    except SchemaError as err:
        raise SchemaError(f"{info.kind} {info.api_version}: {err.path}", err.reason) from None
    schema["properties"] = {**_ROOT_FIELDS, **schema.get("properties", {})}
    schema.pop("default", None)
    return schema


def build_crd(kinds: Sequence[type[Resource]]) -> dict[str, Any]:
    """One CRD for the versions of one group and kind (one :class:`Resource`
    class per version). Raises ValueError when they disagree on the names or
    scope, or do not have exactly one storage version."""
    infos = [kind_info(k) for k in kinds]
    if not infos:
        raise ValueError("build_crd: no kinds")
    first = infos[0]
    for info in infos[1:]:
        for attribute in ("group", "kind", "plural", "singular", "scope", "short_names", "categories"):
            ours, theirs = getattr(first, attribute), getattr(info, attribute)
            # Short names and categories may be declared on one version only.
            if ours != theirs and not (attribute in ("short_names", "categories") and not (ours and theirs)):
                raise ValueError(
                    f"{first.crd_name}: versions {first.version} and {info.version} declare different "
                    f"{attribute.replace('_', ' ')} ({ours!r}, {theirs!r}): the CRD has one"
                )
    seen: set[str] = set()
    for info in infos:
        if info.version in seen:
            raise ValueError(f"{first.kind}: version {info.version} is declared twice")
        seen.add(info.version)
    # storage=True names the storage version; without one, the only version left unsaid (storage=None) is it.
    storage = [i for i in infos if i.storage] or [i for i in infos if i.storage is None]
    if len(storage) != 1:
        named = ", ".join(i.version for i in storage) or "none"
        raise ValueError(
            f"{first.crd_name}: exactly one version must be the storage version (storage=True), not {named}"
        )
    names: dict[str, Any] = {"kind": first.kind, "listKind": f"{first.kind}List", "plural": first.plural, "singular": first.singular}
    short_names = next((i.short_names for i in infos if i.short_names), ())
    categories = next((i.categories for i in infos if i.categories), ())
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    versions = [_version(info, info is storage[0]) for info in sorted(infos, key=lambda i: _priority(i.version))]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": first.crd_name},
        "spec": {"group": first.group, "names": names, "scope": first.scope, "versions": versions},
    }


def _version(info: KindInfo, storage: bool) -> dict[str, Any]:
    version: dict[str, Any] = {"name": info.version, "served": info.served, "storage": storage}
    if info.deprecated:
        version["deprecated"] = True
        if info.deprecation_warning:
            version["deprecationWarning"] = info.deprecation_warning
    if info.printer_columns:
        version["additionalPrinterColumns"] = [c.to_dict() for c in info.printer_columns]
    version["schema"] = {"openAPIV3Schema": schema_of(info.model)}
    subresources: dict[str, Any] = {}
    if info.status_subresource:
        subresources["status"] = {}
    if info.scale:
        subresources["scale"] = info.scale.to_dict()
    if subresources:
        version["subresources"] = subresources
    return version


def build_crds(kinds: Iterable[type[Resource]]) -> list[dict[str, Any]]:
    """One CRD per group and kind, in the order of their CRD names."""
    by_name: dict[str, list[type[Resource]]] = {}
    for k in kinds:
        info = kind_info(k)
        by_name.setdefault(f"{info.group}/{info.kind}", []).append(k)
    crds = [build_crd(group) for group in by_name.values()]
    return sorted(crds, key=lambda c: str(c["metadata"]["name"]))


def find_kinds(module: ModuleType | str) -> list[type[Resource]]:
    """The kinds declared with :func:`polyop.crd.kind` that a module (or its
    name) defines or imports."""
    if isinstance(module, str):
        module = importlib.import_module(module)
    found = []
    for _, value in inspect.getmembers(module, inspect.isclass):
        if issubclass(value, Resource) and isinstance(value.__dict__.get("__polyop_kind__"), KindInfo) and value not in found:
            found.append(value)
    return found


def write_crds(modules: Iterable[ModuleType | str], directory: str | Path) -> list[Path]:
    """Write one ``<group>_<plural>.yaml`` per group and kind declared in the
    modules into directory (made when missing), as controller-gen names them,
    and return the paths."""
    kinds: list[type[Resource]] = []
    for module in modules:
        kinds.extend(k for k in find_kinds(module) if k not in kinds)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for crd in build_crds(kinds):
        spec = crd["spec"]
        path = out / f"{spec['group']}_{spec['names']['plural']}.yaml"
        path.write_text(to_yaml(crd))
        paths.append(path)
    return paths


def to_yaml(crd: dict[str, Any]) -> str:
    """The CRD as a YAML document, keys in the order built, long text kept on one line."""
    return "---\n" + yaml.dump(crd, Dumper=_Dumper, sort_keys=False, width=1 << 20, allow_unicode=True)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)

_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def _priority(version: str) -> tuple[int, int, int, str]:
    # Kubernetes' version priority: GA before beta before alpha, higher first; others last, by name.
    match = _VERSION.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    return ({None: 0, "beta": 1, "alpha": 2}[stage], -int(major), -int(minor or 0), version)
