from __future__ import annotations

import pytest

from polyop import GVK, Object, ObjectMeta, OwnerReference


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("apps/v1/Deployment", GVK("apps", "v1", "Deployment"), id="a named group has three parts"),
        pytest.param("v1/ConfigMap", GVK("", "v1", "ConfigMap"), id="the core group has two"),
        pytest.param(GVK("a", "b", "C"), GVK("a", "b", "C"), id="a GVK is returned as it is"),
    ],
)
def test_gvk_parse(text: str | GVK, want: GVK) -> None:
    assert GVK.parse(text) == want


@pytest.mark.parametrize("text", ["ConfigMap", "a/b/c/D", "v1/", "//"], ids=lambda t: f"{t!r} is refused")
def test_gvk_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="group/version/Kind"):
        GVK.parse(text)


def test_gvk_api_version_round_trips() -> None:
    for gvk in (GVK("apps", "v1", "Deployment"), GVK("", "v1", "Pod")):
        assert GVK.from_api_version(gvk.api_version, gvk.kind) == gvk
        assert GVK.from_proto(gvk.to_proto()) == gvk
    assert str(GVK("", "v1", "Pod")) == "v1/Pod"


def test_object_reads_the_json_and_keeps_big_integers() -> None:
    obj = Object.from_json(
        b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"prod","generation":3,'
        b'"labels":{"app":"web"},"finalizers":["f"],"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"o",'
        b'"uid":"u","controller":true}]},"spec":{"big":9007199254740993}}'
    )
    assert (obj.name, obj.namespace, obj.gvk) == ("web", "prod", GVK("apps", "v1", "Deployment"))
    assert obj.meta == ObjectMeta(
        name="web",
        namespace="prod",
        generation=3,
        labels={"app": "web"},
        finalizers=("f",),
        owner_references=(OwnerReference("v1", "X", "o", "u", controller=True),),
    )
    assert obj["spec"]["big"] == 9007199254740993
    assert b"9007199254740993" in obj.to_json()


def test_object_creates_status_and_conditions_when_missing() -> None:
    obj = Object({"metadata": {"name": "a"}})
    obj.status["phase"] = "Ready"
    obj.conditions.append({"type": "Ready"})
    assert obj["status"] == {"phase": "Ready", "conditions": [{"type": "Ready"}]}
    assert Object().meta == ObjectMeta()


def test_object_from_json_refuses_what_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="expected a JSON object"):
        Object.from_json(b"[1]")
