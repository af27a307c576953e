"""CRDs from Python types (polyop.crd): a schema fragment per marker, the errors
for what the API server would refuse, the CRD's assembly, and parse/dump."""

from __future__ import annotations

import datetime
import enum
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml
from pydantic import ConfigDict, Field, ValidationError

from polyop import crd


class Color(enum.Enum):
    """A color."""

    RED = "red"
    BLUE = "blue"


class Port(crd.Model):
    name: str
    port: int


class Inner(crd.Model):
    """Inner is nested."""

    value_count: int = 0


def _spec_schema(annotation: Any, default: Any = ..., **field: Any) -> dict[str, Any]:
    """The schema of spec.field, for a spec with one field of that type."""
    namespace: dict[str, Any] = {"__annotations__": {"field": annotation}}
    if default is not ...:
        namespace["field"] = Field(default, **field) if field else default
    elif field:
        namespace["field"] = Field(**field)
    spec = type("Spec", (crd.Model,), namespace)
    kind = type("Thing", (crd.Resource,), {"__annotations__": {"spec": spec}})
    declared = crd.kind(group="example.com", version="v1")(kind)
    schema = crd.schema_of(declared)["properties"]["spec"]
    field_schema: dict[str, Any] = schema["properties"]["field"]
    field_schema["__required"] = "field" in schema.get("required", [])
    return field_schema


def _without_required(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "__required"}


MARKERS: dict[str, tuple[Any, Any, dict[str, Any], dict[str, Any]]] = {
    # sentence: (annotation, default, Field keywords, expected schema)
    "a field without a default is required": (str, ..., {}, {"type": "string", "__required": True}),
    "a field with a default is optional, with the default": (int, 3, {}, {"type": "integer", "default": 3, "__required": False}),
    "Optional[X] = None is an optional, nullable X": (int | None, None, {}, {"type": "integer", "nullable": True, "__required": False}),
    "a Field description is the description": (str, "", {"description": "the name"}, {"type": "string", "default": "", "description": "the name", "__required": False}),
    "bool, float": (float, 0.5, {}, {"type": "number", "default": 0.5, "__required": False}),
    "a Literal is an enum": (Literal["a", "b"], "a", {}, {"type": "string", "enum": ["a", "b"], "default": "a", "__required": False}),
    "a Literal of one value is an enum of one": (Literal["only"], "only", {}, {"type": "string", "enum": ["only"], "default": "only", "__required": False}),
    "an Enum is an enum, with its docstring": (Color, Color.RED, {}, {"type": "string", "enum": ["red", "blue"], "default": "red", "description": "A color.", "__required": False}),
    "ge and le are minimum and maximum": (int, 1, {"ge": 0, "le": 10}, {"type": "integer", "default": 1, "minimum": 0, "maximum": 10, "__required": False}),
    "gt and lt are exclusive": (float, 1.0, {"gt": 0, "lt": 10}, {"type": "number", "default": 1.0, "minimum": 0, "exclusiveMinimum": True, "maximum": 10, "exclusiveMaximum": True, "__required": False}),
    "multiple_of is multipleOf": (int, 4, {"multiple_of": 2}, {"type": "integer", "default": 4, "multipleOf": 2, "__required": False}),
    "min_length, max_length and pattern on a string": (str, ..., {"min_length": 1, "max_length": 63, "pattern": "^[a-z]+$"}, {"type": "string", "minLength": 1, "maxLength": 63, "pattern": "^[a-z]+$", "__required": True}),
    "min_length and max_length on a list are minItems and maxItems": (list[str], ..., {"min_length": 1, "max_length": 5}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5, "__required": True}),
    "min_length on a dict is minProperties": (dict[str, str], ..., {"min_length": 1}, {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1, "__required": True}),
    "datetime has format date-time": (datetime.datetime, ..., {}, {"type": "string", "format": "date-time", "__required": True}),
    "date has format date": (datetime.date, ..., {}, {"type": "string", "format": "date", "__required": True}),
    "Int32 has format int32": (crd.Int32, 0, {}, {"type": "integer", "format": "int32", "default": 0, "__required": False}),
    "Int64 has format int64": (crd.Int64, 0, {}, {"type": "integer", "format": "int64", "default": 0, "__required": False}),
    "Format sets any format": (Annotated[str, crd.Format("uuid")], ..., {}, {"type": "string", "format": "uuid", "__required": True}),
    "a set is list type set": (set[str], ..., {}, {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "__required": True}),
    "ListType atomic": (Annotated[list[int], crd.ListType("atomic")], ..., {}, {"type": "array", "items": {"type": "integer"}, "x-kubernetes-list-type": "atomic", "__required": True}),
    "ListMap is list type map with its keys": (
        Annotated[list[Port], crd.ListMap("name")],
        ...,
        {},
        {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}, "required": ["name", "port"]},
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "__required": True,
        },
    ),
    "a dict is a map (additionalProperties)": (dict[str, int], ..., {}, {"type": "object", "additionalProperties": {"type": "integer"}, "__required": True}),
    "MapType atomic": (Annotated[dict[str, str], crd.MapType("atomic")], ..., {}, {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic", "__required": True}),
    "Unstructured preserves unknown fields": (crd.Unstructured, ..., {}, {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "__required": True}),
    "PreserveUnknownFields on Any keeps any value": (Annotated[Any, crd.PreserveUnknownFields()], ..., {}, {"x-kubernetes-preserve-unknown-fields": True, "__required": True}),
    "EmbeddedResource is an embedded resource": (crd.EmbeddedResource, ..., {}, {"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True, "__required": True}),
    "IntOrString is int-or-string": (crd.IntOrString, "25%", {}, {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}], "default": "25%", "__required": False}),
    "int | str is int-or-string too": (int | str, 1, {}, {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}], "default": 1, "__required": False}),
    "Validation is a CEL rule": (Annotated[int, crd.Validation("self >= 0", "must not be negative")], ..., {}, {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0", "message": "must not be negative"}], "__required": True}),
    "a nested model is inlined with its docstring, fields in camelCase": (Inner, ..., {}, {"type": "object", "description": "Inner is nested.", "properties": {"valueCount": {"type": "integer", "default": 0}}, "__required": True}),
    "a Field description wins over the model's docstring": (Inner, ..., {"description": "the inner part"}, {"type": "object", "description": "the inner part", "properties": {"valueCount": {"type": "integer", "default": 0}}, "__required": True}),
    "Optional[Model] is a nullable object": (Inner | None, None, {}, {"type": "object", "nullable": True, "description": "Inner is nested.", "properties": {"valueCount": {"type": "integer", "default": 0}}, "__required": False}),
    "a model default is its JSON": (Inner, Inner(value_count=2), {}, {"type": "object", "description": "Inner is nested.", "default": {"valueCount": 2}, "properties": {"valueCount": {"type": "integer", "default": 0}}, "__required": False}),
    "a default_factory gives no default": (list[str], None, {"default_factory": list}, {"type": "array", "items": {"type": "string"}, "__required": False}),
}


@pytest.mark.parametrize("sentence", MARKERS)
def test_marker(sentence: str) -> None:
    annotation, default, field, expected = MARKERS[sentence]
    if "default_factory" in field:
        got = _spec_schema(annotation, **field)
    else:
        got = _spec_schema(annotation, default, **field)
    assert got == expected


def test_an_attribute_docstring_is_the_description() -> None:
    class Spec(crd.Model):
        replicas: int = 1
        """How many replicas to run."""

    @crd.kind(group="example.com", version="v1")
    class Doc(crd.Resource):
        """A Doc is documented."""

        spec: Spec

    schema = crd.schema_of(Doc)
    assert schema["description"] == "A Doc is documented."
    assert schema["properties"]["spec"]["properties"]["replicas"]["description"] == "How many replicas to run."


ERRORS: dict[str, tuple[Any, str]] = {
    # sentence: (annotation, what the error says)
    "an untyped Any": (Any, "spec.field (in Spec): has no type"),
    "a dict of Any": (dict[str, Any], "spec.field (in Spec): a map of values of any shape"),
    "a list of Any": (list[Any], "spec.field[*] (in Spec): has no type"),
    "a union of different types": (int | bool, "spec.field (in Spec): a union of boolean and integer is not a structural schema"),
    "a union of models": (Inner | Port, "spec.field (in Spec): a union of Inner and Port"),
    "a tuple": (tuple[int, str], "spec.field (in Spec): a tuple is not a structural schema"),
    "bytes": (bytes, "spec.field (in Spec): bytes has no JSON form"),
    "timedelta": (datetime.timedelta, "spec.field (in Spec): timedelta is written as ISO 8601"),
    "a set of models": (Annotated[list[Inner], crd.ListType("set")], "spec.field (in Spec): a set's items must be scalars"),
    "a list map key that is not a field": (Annotated[list[Port], crd.ListMap("id")], "spec.field (in Spec): list map key 'id' is not a field"),
    "an optional list map key": (Annotated[list[Inner], crd.ListMap("valueCount")], ""),
    "a None-only field": (None, "spec.field (in Spec): None is its only value"),
}


@pytest.mark.parametrize("sentence", ERRORS)
def test_error(sentence: str) -> None:
    annotation, message = ERRORS[sentence]
    if sentence == "an optional list map key":

        class Keyed(crd.Model):
            key: str | None = None

        annotation, message = Annotated[list[Keyed], crd.ListMap("key")], "spec.field (in Spec): list map key 'key' must be required or have a default"
    with pytest.raises(crd.SchemaError) as caught:
        _spec_schema(annotation)
    assert str(caught.value).startswith("Thing example.com/v1: ")
    assert message in str(caught.value)


INVALID_DEFAULTS: dict[str, tuple[Any, Any, dict[str, Any], str]] = {
    # sentence: (annotation, default, Field keywords, what the error says)
    "above the maximum": (int, 11, {"le": 10}, "the default 11 is above the maximum 10"),
    "at an exclusive minimum": (float, 0.0, {"gt": 0}, "the default 0.0 is below the minimum 0"),
    "not a multiple": (int, 3, {"multiple_of": 2}, "the default 3 is not a multiple of 2"),
    "too short": (str, "", {"min_length": 1}, "the default '' has a length out of minLength/maxLength"),
    "not matching the pattern": (str, "ABC", {"pattern": "^[a-z]+$"}, "the default 'ABC' does not match the pattern"),
    "too few items": (list[str], [], {"min_length": 1}, "the default [] has a number of items out of minItems/maxItems"),
}


@pytest.mark.parametrize("sentence", INVALID_DEFAULTS)
def test_a_default_its_own_constraints_refuse_is_an_error(sentence: str) -> None:
    annotation, default, field, message = INVALID_DEFAULTS[sentence]
    with pytest.raises(crd.SchemaError, match="spec.field \\(in Spec\\): ") as caught:
        _spec_schema(annotation, default, **field)
    assert message in str(caught.value)
    assert "the API server refuses a CRD whose default is invalid" in str(caught.value)


@pytest.mark.parametrize("pattern", ["^(?=a)", "^(?!a)", "(?<=a)b", "(a)\\1", "(?P<x>a)(?P=x)"])
def test_a_pattern_the_api_server_cannot_compile_is_an_error(pattern: str) -> None:
    # pydantic's own regular expressions (Rust's regex) refuse these as RE2 does; Python's re, which a model
    # may choose, has them.
    class Spec(crd.Model):
        model_config = ConfigDict(regex_engine="python-re")

        field: Annotated[str, Field(pattern=pattern)]

    @crd.kind(group="example.com", version="v1")
    class Patterned(crd.Resource):
        spec: Spec

    with pytest.raises(crd.SchemaError, match=r"spec.field \(in Spec\): pattern .* uses a lookaround or a backreference"):
        crd.schema_of(Patterned)


def test_a_recursive_model_is_an_error_naming_the_field() -> None:
    class Node(crd.Model):
        children: list[Node] = Field(default_factory=list)

    with pytest.raises(crd.SchemaError, match=r"spec\.field\.children\[\*\] \(in Node\): Node contains itself"):
        _spec_schema(Node)


def test_an_error_names_the_model_of_a_nested_field() -> None:
    class Deep(crd.Model):
        anything: Any = None

    class Middle(crd.Model):
        deep: Deep

    with pytest.raises(crd.SchemaError, match=r"spec\.field\.deep\.anything \(in Deep\): has no type"):
        _spec_schema(Middle)


class WidgetSpec(crd.Model):
    replicas: int = 1
    max_surge: crd.IntOrString = "25%"


class WidgetStatus(crd.StatusBase):
    replicas: int = 0
    selector: str = ""


@crd.kind(
    group="example.com",
    version="v1",
    short_names=["wd"],
    categories=["all"],
    scope="Cluster",
    scale=crd.Scale(label_selector_path=".status.selector"),
    printer_columns=[
        crd.PrinterColumn("Replicas", ".status.replicas", "integer", description="replicas running"),
        crd.PrinterColumn("Age", ".metadata.creationTimestamp", "date", priority=1),
    ],
)
class Widget(crd.Resource):
    """A Widget runs a few replicas."""

    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: WidgetStatus = Field(default_factory=WidgetStatus)


@crd.kind(group="example.com", version="v1beta1", kind="Widget", scope="Cluster", served=True, storage=False, deprecated=True, deprecation_warning="use v1")
class WidgetV1beta1(crd.Resource):
    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: WidgetStatus = Field(default_factory=WidgetStatus)


def test_the_crd_of_a_kind() -> None:
    (widget,) = crd.build_crds([Widget])
    assert widget["apiVersion"] == "apiextensions.k8s.io/v1"
    assert widget["kind"] == "CustomResourceDefinition"
    assert widget["metadata"] == {"name": "widgets.example.com"}
    spec = widget["spec"]
    assert spec["group"] == "example.com"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "Widget",
        "listKind": "WidgetList",
        "plural": "widgets",
        "singular": "widget",
        "shortNames": ["wd"],
        "categories": ["all"],
    }
    (v1,) = spec["versions"]
    assert (v1["name"], v1["served"], v1["storage"]) == ("v1", True, True)
    assert v1["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"},
    }
    assert v1["additionalPrinterColumns"] == [
        {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas", "description": "replicas running"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "priority": 1},
    ]
    schema = v1["schema"]["openAPIV3Schema"]
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["apiVersion"]["type"] == "string"
    status = schema["properties"]["status"]["properties"]
    assert status["observedGeneration"] == {
        "type": "integer",
        "format": "int64",
        "nullable": True,
        "description": "The metadata.generation this status was computed for.",
    }
    conditions = status["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    condition = conditions["items"]
    assert condition["required"] == ["type", "status", "lastTransitionTime", "reason"]
    assert condition["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert condition["properties"]["lastTransitionTime"]["format"] == "date-time"


def test_no_status_field_means_no_status_subresource() -> None:
    @crd.kind(group="example.com", version="v1")
    class Plain(crd.Resource):
        spec: WidgetSpec

    (plain,) = crd.build_crds([Plain])
    assert "subresources" not in plain["spec"]["versions"][0]
    assert plain["spec"]["names"]["plural"] == "plains"


@pytest.mark.parametrize(("kind", "plural"), [("Policy", "policies"), ("Class", "classes"), ("Box", "boxes"), ("Gateway", "gateways")])
def test_plural_as_kubebuilder_makes_it(kind: str, plural: str) -> None:
    declared = crd.kind(group="example.com", version="v1", kind=kind)(type(kind, (crd.Resource,), {}))
    assert crd.kind_info(declared).plural == plural


def test_several_versions_with_one_storage_version() -> None:
    (widget,) = crd.build_crds([WidgetV1beta1, Widget])
    versions = widget["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [("v1", True, True), ("v1beta1", True, False)]
    assert versions[1]["deprecated"] is True
    assert versions[1]["deprecationWarning"] == "use v1"


def test_several_versions_need_exactly_one_storage_version() -> None:
    @crd.kind(group="example.com", version="v2", kind="Widget", scope="Cluster", storage=True)
    class WidgetV2(crd.Resource):
        spec: WidgetSpec = Field(default_factory=WidgetSpec)

    @crd.kind(group="example.com", version="v3", kind="Widget", scope="Cluster", storage=True)
    class WidgetV3(crd.Resource):
        spec: WidgetSpec = Field(default_factory=WidgetSpec)

    @crd.kind(group="example.com", version="v1alpha1", kind="Widget", scope="Cluster", storage=False)
    class WidgetV1alpha1(crd.Resource):
        spec: WidgetSpec = Field(default_factory=WidgetSpec)

    (widget,) = crd.build_crds([Widget, WidgetV2])
    assert [(v["name"], v["storage"]) for v in widget["spec"]["versions"]] == [("v2", True), ("v1", False)]
    with pytest.raises(ValueError, match=r"widgets.example.com: exactly one version must be the storage version \(storage=True\), not v2, v3"):
        crd.build_crds([Widget, WidgetV2, WidgetV3])
    with pytest.raises(ValueError, match="widgets.example.com: exactly one version must be the storage version .*, not none"):
        crd.build_crds([WidgetV1beta1, WidgetV1alpha1])
    with pytest.raises(ValueError, match="widgets.example.com: exactly one version must be the storage version .*, not v1, v1beta1"):
        crd.build_crds([Widget, crd.kind(group="example.com", version="v1beta1", kind="Widget", scope="Cluster")(type("Unsaid", (crd.Resource,), {}))])


def test_versions_must_agree_on_the_names() -> None:
    @crd.kind(group="example.com", version="v2", kind="Widget", short_names=["w"], scope="Cluster")
    class Other(crd.Resource):
        pass

    with pytest.raises(ValueError, match=r"widgets.example.com: versions v1 and v2 declare different short names \(\('wd',\), \('w',\)\)"):
        crd.build_crds([Widget, Other])


def test_declaration_errors() -> None:
    with pytest.raises(ValueError, match="group 'example' must be a DNS subdomain with a dot"):
        crd.kind(group="example", version="v1")(type("Bad", (crd.Resource,), {}))
    with pytest.raises(ValueError, match="version 'V1' must be lower case"):
        crd.kind(group="example.com", version="V1")(type("Bad", (crd.Resource,), {}))
    with pytest.raises(ValueError, match="status_subresource=True needs a status field"):
        crd.kind(group="example.com", version="v1", status_subresource=True)(type("Bad", (crd.Resource,), {}))
    with pytest.raises(TypeError, match="is not declared as a kind"):
        crd.schema_of(crd.Resource)


OBJECT: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": {"name": "w", "generation": 3, "resourceVersion": "42", "managedFields": [{"manager": "kubectl"}]},
    "spec": {"replicas": 2, "maxSurge": 1},
    "status": {
        "replicas": 1,
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": "False", "reason": "Starting", "message": "", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
    },
}


def test_parse_gives_the_typed_object_and_to_dict_gives_it_back() -> None:
    widget = Widget.parse(OBJECT)
    assert widget.spec.replicas == 2
    assert widget.spec.max_surge == 1
    assert widget.metadata.generation == 3
    assert widget.status.observed_generation == 2
    assert widget.status.conditions[0].last_transition_time == "2026-12-01T10:00:00Z"
    # Every field the object had comes back, and the defaults of the fields it lacked.
    assert widget.to_dict() == {**OBJECT, "status": {**OBJECT["status"], "selector": ""}}


def test_status_dict_hands_the_status_back() -> None:
    widget = Widget.parse(OBJECT)
    widget.status.replicas = 2
    widget.status.observed_generation = widget.metadata.generation
    now = datetime.datetime(2026, 12, 1, 11, 0, tzinfo=datetime.timezone.utc)
    assert widget.status.set_condition("Ready", True, "Running", "2 replicas", observed_generation=3, now=now)
    assert not widget.status.set_condition("Ready", True, "Running", "2 replicas", observed_generation=3, now=now)
    assert widget.status.find_condition("Ready") is not None
    assert widget.status_dict() == {
        "replicas": 2,
        "selector": "",
        "observedGeneration": 3,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Running", "message": "2 replicas", "lastTransitionTime": "2026-12-01T11:00:00Z", "observedGeneration": 3}
        ],
    }
    assert widget.status.remove_condition("Ready")
    assert widget.status_dict()["conditions"] == []


def test_a_new_object_has_its_api_version_and_kind() -> None:
    widget = Widget(metadata=crd.ObjectMeta(name="w"))
    assert widget.to_dict()["apiVersion"] == "example.com/v1"
    assert widget.to_dict()["kind"] == "Widget"
    assert widget.to_dict()["metadata"] == {"name": "w"}
    assert Widget(spec=WidgetSpec(max_surge=3)).spec.max_surge == 3


def test_parse_refuses_an_object_that_does_not_fit() -> None:
    with pytest.raises(ValidationError, match="spec.replicas"):
        Widget.parse({**OBJECT, "spec": {"replicas": "many"}})


SAMPLE = '''
from pydantic import Field
from polyop import crd

class GadgetSpec(crd.Model):
    size: int = 1

@crd.kind(group="example.com", version="v1")
class Gadget(crd.Resource):
    spec: GadgetSpec = Field(default_factory=GadgetSpec)

@crd.kind(group="other.example.com", version="v1", scope="Cluster")
class Gizmo(crd.Resource):
    spec: GadgetSpec = Field(default_factory=GadgetSpec)
'''


def test_the_command_writes_one_file_per_group_kind(tmp_path: Path) -> None:
    (tmp_path / "sample_api.py").write_text(SAMPLE)
    out = tmp_path / "config" / "crd"
    done = subprocess.run(
        [sys.executable, "-m", "polyop.crd", "sample_api", "-o", str(out)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["example.com_gadgets.yaml", "other.example.com_gizmos.yaml"]
    gadgets = yaml.safe_load((out / "example.com_gadgets.yaml").read_text())
    assert gadgets["metadata"]["name"] == "gadgets.example.com"
    assert gadgets["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] == {"default": 1, "type": "integer"}


def test_the_command_names_the_field_it_refuses(tmp_path: Path) -> None:
    (tmp_path / "bad_api.py").write_text(SAMPLE.replace("size: int = 1", "size: int | bool = 1"))
    done = subprocess.run([sys.executable, "-m", "polyop.crd", "bad_api"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "polyop.crd: Gadget example.com/v1: spec.size (in GadgetSpec): a union of boolean and integer" in done.stderr


def test_the_command_says_when_a_module_declares_no_kind(tmp_path: Path) -> None:
    (tmp_path / "empty_api.py").write_text("x = 1\n")
    done = subprocess.run([sys.executable, "-m", "polyop.crd", "empty_api"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "empty_api declare no kind" in done.stderr
