"""An object the webhook's model cannot read is denied with field errors, as
the API server's own validation would deny it, never a failed webhook."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

import polyop
from polyop import FieldErrorType, crd
from polyop.testing import Harness


class WebsiteSpec(crd.Model):
    replicas: Annotated[int, Field(ge=1, le=10)]
    image: str | None = None
    ports: list[Annotated[int, Field(gt=0)]] = Field(default_factory=list)


@crd.kind(group="example.com", version="v1")
class Website(crd.Resource):
    spec: WebsiteSpec


def website(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "site", "namespace": "web"}, "spec": spec}


def test_a_typed_validator_denies_an_object_its_model_cannot_read_with_field_errors() -> None:
    sidecar = polyop.Sidecar("websites")
    sidecar.validator(Website)(lambda site, req: None)
    h = Harness(sidecar)

    too_many = h.validate(website(replicas=11))
    assert not too_many.allowed
    assert too_many.message == "Website 'site' is invalid: it does not fit Website"
    assert too_many.field_errors == [("spec.replicas", FieldErrorType.INVALID, "Input should be less than or equal to 10")]

    assert h.validate(website(image="nginx")).field_errors == [("spec.replicas", FieldErrorType.REQUIRED, "Field required")]
    assert h.validate(website(replicas=1, ports=[80, 0])).field_errors == [
        ("spec.ports[1]", FieldErrorType.INVALID, "Input should be greater than 0")
    ]


def test_a_typed_defaulter_denies_an_object_its_model_cannot_read_and_merges_its_changes() -> None:
    sidecar = polyop.Sidecar("websites")

    @sidecar.defaulter(Website)
    def default(site: Website, req: polyop.AdmissionRequest) -> None:
        site.spec.image = site.spec.image or "nginx:1.27"

    h = Harness(sidecar)
    denied = h.default(website(replicas=0))
    assert (denied.allowed, denied.field_errors) == (False, [("spec.replicas", FieldErrorType.INVALID, "Input should be greater than or equal to 1")])

    defaulted = h.default({**website(replicas=2), "extra": {"kept": True}})
    assert defaulted.allowed and defaulted.object is not None
    assert defaulted.object["spec"]["image"] == "nginx:1.27"
    assert defaulted.object["extra"] == {"kept": True}  # what the model does not name is kept


def test_a_model_parsed_in_an_untyped_validator_denies_rather_than_fails() -> None:
    sidecar = polyop.Sidecar("websites")

    @sidecar.validator("example.com/v1/Website")
    def validate(obj: polyop.Object, req: polyop.AdmissionRequest) -> None:
        Website.parse(obj)

    got = Harness(sidecar).validate(website(replicas=0))
    assert not got.allowed
    assert got.field_errors == [("spec.replicas", FieldErrorType.INVALID, "Input should be greater than or equal to 1")]


def test_a_validator_gets_the_old_object_on_delete_and_warns_through_the_request() -> None:
    sidecar = polyop.Sidecar("websites")

    @sidecar.validator(Website)
    def validate(site: Website, req: polyop.AdmissionRequest) -> list[str]:
        req.warn(f"deleting {site.spec.replicas} replicas")
        return ["returned too"]

    got = Harness(sidecar).validate(website(replicas=3), operation=polyop.Operation.DELETE)
    assert got.allowed and got.warnings == ["deleting 3 replicas", "returned too"]
