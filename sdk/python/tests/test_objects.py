from __future__ import annotations

import json
from typing import Any

import pytest

from polyop import GVK, Object, ObjectMeta, OwnerReference, objects


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


def test_objects_are_decoded_and_encoded_without_the_json_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wire's JSON goes through orjson, several times as fast as json
    (see the README's performance notes); json is the fallback only."""

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("the json module was used")

    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"},"data":{"k":"v\xc3\xa9"}}'
    monkeypatch.setattr(json, "loads", refused)
    monkeypatch.setattr(json, "dumps", refused)
    obj = Object.from_json(raw)
    assert obj["data"]["k"] == "v\u00e9"
    assert obj.to_json() == raw


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"a": [1, 1.5, -0.0, 2e300, None, True, "\u00e9\u2028<>&\x00"]}, id="JSON's types, non-ASCII kept"),
        pytest.param({"n": 2**64 + 1, "m": -(2**63) - 1}, id="integers beyond 64 bits"),
        pytest.param({1: "a", 2.5: "b", None: "c", False: "d"}, id="keys that are not strings"),
        pytest.param({"t": (1, 2)}, id="a tuple is an array"),
        pytest.param(Object({"kind": "X"}), id="an Object"),
    ],
)
def test_encode_writes_what_json_dumps_wrote(value: Any) -> None:
    assert objects.encode(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def test_decode_reads_what_json_loads_read() -> None:
    for raw in (b'{"i":[9223372036854775807,-9223372036854775808,18446744073709551615]}', b'{"x":NaN,"y":[Infinity]}'):
        assert repr(objects.decode(raw)) == repr(json.loads(raw))
    # Beyond 64 bits, a float, as the API server reads it.
    assert objects.decode(b"123456789012345678901234567890") == 1.2345678901234568e29
    with pytest.raises(ValueError):
        Object.from_json(b'{"x":')
    with pytest.raises(ValueError, match="expected a JSON object"):
        Object.from_json(b"[1]")
