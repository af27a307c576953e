"""The shapes the one vocabulary replaced still work, for one release, and say
what replaces them."""

from __future__ import annotations

import dataclasses
import inspect
import os
import tempfile
from typing import Any, get_type_hints

import pytest

import polyop
from polyop import FieldErrorType, ServeOptions
from polyop._serving import ServeOverrides
from polyop.testing import Harness

WIDGET = "example.com/v1/Widget"


def widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "ns"}, "spec": spec}


def test_a_validator_that_takes_the_request_alone_still_works() -> None:
    sidecar = polyop.Sidecar("w")

    def validate(req: polyop.AdmissionRequest) -> None:
        assert req.object is not None
        if req.object.spec.get("size", 0) < 0:
            raise polyop.DeniedError("negative", [polyop.FieldError.invalid("spec.size", -1, "must not be negative")])

    with pytest.deprecated_call(match="take \\(obj, req\\)"):
        sidecar.validator(WIDGET)(validate)
    h = Harness(sidecar)
    assert h.validate(widget(size=1)).allowed
    assert h.validate(widget(size=-1)).field_errors == [("spec.size", FieldErrorType.INVALID, "must not be negative")]


def test_a_converter_named_by_group_and_kind_still_works() -> None:
    sidecar = polyop.Sidecar("w")
    with pytest.deprecated_call(match="converter\\(kind, versions\\)"):
        sidecar.converter("example.com", "Widget", ["v1", "v2"])(lambda obj, api_version: {**obj, "apiVersion": api_version})
    assert Harness(sidecar).convert([widget()], "example.com/v2")[0]["apiVersion"] == "example.com/v2"


def test_an_index_with_path_still_works() -> None:
    sidecar = polyop.Sidecar("w")
    with pytest.deprecated_call(match="field_path"):
        sidecar.index("v1/Pod", "node", path=".spec.nodeName")
    sidecar.reconciler(WIDGET)(lambda obj, ctx: None)
    assert Harness(sidecar).describe().indexes[0].field_path == ".spec.nodeName"


def test_an_address_passed_positionally_still_serves_there() -> None:
    sidecar = polyop.Sidecar("w")
    sidecar.reconciler(WIDGET)(lambda obj, ctx: None)
    with tempfile.TemporaryDirectory() as tmp:
        socket = os.path.join(tmp, "s.sock")
        with pytest.deprecated_call(match="address="), sidecar.start(f"unix://{socket}", reflection=False) as running:
            assert running.address == f"unix://{socket}"


def test_server_and_async_server_are_the_running_sidecars_old_names() -> None:
    import polyop.server

    with pytest.deprecated_call(match="RunningSidecar"):
        assert polyop.Server is polyop.RunningSidecar
    with pytest.deprecated_call(match="AsyncRunningSidecar"):
        assert polyop.AsyncServer is polyop.AsyncRunningSidecar
    with pytest.deprecated_call(match="RunningSidecar"):
        assert polyop.server.Server is polyop.RunningSidecar


def test_is_true_and_is_false_are_is_condition_true_and_false() -> None:
    conditions: list[dict[str, Any]] = []
    polyop.mark_condition_true(conditions, polyop.READY, "Reconciled")
    with pytest.deprecated_call(match="is_condition_true"):
        assert polyop.is_true(conditions, polyop.READY)
    with pytest.deprecated_call(match="is_condition_false"):
        assert not polyop.is_false(conditions, polyop.READY)


def test_the_serving_methods_take_the_options_and_each_of_their_fields() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(ServeOptions)}
    assert set(get_type_hints(ServeOverrides)) == set(fields)
    for method in (polyop.Sidecar.serve, polyop.Sidecar.start, polyop.Sidecar.serve_async, polyop.Sidecar.start_async):
        params = inspect.signature(method).parameters
        assert list(params)[:2] == ["self", "options"], method.__name__
        assert {name: p.default for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY} == fields, method.__name__


def test_keyword_arguments_override_the_options() -> None:
    sidecar = polyop.Sidecar("w")
    sidecar.reconciler(WIDGET)(lambda obj, ctx: None)
    with tempfile.TemporaryDirectory() as tmp:
        options = ServeOptions(address=f"unix://{tmp}/a.sock", reflection=False)
        with sidecar.start(options, address=f"unix://{tmp}/b.sock") as running:
            assert running.address == f"unix://{tmp}/b.sock"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.grace = 1  # type: ignore[misc]
