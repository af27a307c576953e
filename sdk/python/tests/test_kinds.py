"""Every registration takes a kind the same ways: a model class, its KindInfo,
a GVK or its string; and built-in kinds are typed, with lightkube's models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from lightkube.models.core_v1 import ConfigMap as ConfigMapModel
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Secret
from pydantic import Field

import polyop
from polyop import Owns, Watch, crd
from polyop.testing import FakeCluster, Harness


class WebsiteSpec(crd.Model):
    replicas: Annotated[int, Field(ge=1, le=10)]
    image: str = "nginx"


@crd.kind(group="example.com", version="v1")
class Website(crd.Resource):
    spec: WebsiteSpec


KINDS = [
    pytest.param(Website, id="the model class"),
    pytest.param(crd.kind_info(Website), id="its KindInfo"),
    pytest.param(polyop.GVK("example.com", "v1", "Website"), id="a GVK"),
    pytest.param("example.com/v1/Website", id="a GVK string"),
]


def register_everything(kind: Any) -> polyop.Sidecar:
    sidecar = polyop.Sidecar("websites")
    sidecar.reconciler(kind, finalizer="example.com/cleanup")(lambda obj, ctx: None)
    sidecar.finalizer(kind)(lambda obj, ctx: None)
    sidecar.deleted(kind)(lambda request, ctx: None)
    sidecar.defaulter(kind)(lambda obj, req: None)
    sidecar.validator(kind)(lambda obj, req: None)
    sidecar.converter(kind, ["v1", "v2"])(lambda obj, version: obj)
    sidecar.index(kind, "by-image", field_path=".spec.image")
    sidecar.cache_kind(kind, namespaces=["web"])
    sidecar.reconciler(Deployment, owns=[Owns(kind)], watches=[Watch(kind, label="example.com/website")])(lambda obj, ctx: None)
    return sidecar


@pytest.mark.parametrize("kind", KINDS)
def test_every_registration_takes_the_kind_each_way(kind: Any) -> None:
    assert Harness(register_everything(kind)).describe() == Harness(register_everything("example.com/v1/Website")).describe()


def test_a_validator_registered_with_the_model_class_gets_the_typed_object() -> None:
    sidecar = polyop.Sidecar("websites")
    seen: list[Website] = []

    @sidecar.validator(Website)
    def validate(website: Website, req: polyop.AdmissionRequest) -> None:
        seen.append(website)

    got = Harness(sidecar).validate(website(replicas=3))
    assert got.allowed
    assert isinstance(seen[0], Website) and seen[0].spec.replicas == 3


def test_a_class_that_declares_no_kind_is_refused_with_a_reason() -> None:
    class Plain:
        pass

    with pytest.raises(TypeError, match="declares no kind"):
        polyop.Sidecar("s").validator(Plain)


def test_lightkube_resources_name_built_in_kinds() -> None:
    sidecar = polyop.Sidecar("websites")
    sidecar.reconciler(Website, owns=[Deployment, Owns(ConfigMap, send_observed=True)], watches=[Watch(Secret, label="a")])(
        lambda obj, ctx: None
    )
    controller = Harness(sidecar).describe().controllers[0]
    assert [(o.kind.group, o.kind.version, o.kind.kind) for o in controller.owns] == [("apps", "v1", "Deployment"), ("", "v1", "ConfigMap")]
    assert (controller.watches[0].kind.version, controller.watches[0].kind.kind) == ("v1", "Secret")


def config_map(owner: Website, model: Callable[..., Any] = ConfigMap) -> Any:
    return model(metadata=ObjectMeta(name=f"{owner.metadata.name}-settings", namespace=owner.metadata.namespace), data={"image": owner.spec.image})


@pytest.mark.parametrize("model", [ConfigMap, ConfigMapModel], ids=["a lightkube resource", "a lightkube model"])
def test_typed_built_in_children_are_sent_as_the_api_servers_json(model: Callable[..., Any]) -> None:
    sidecar = polyop.Sidecar("websites")

    @sidecar.reconciler(Website, owns=[ConfigMap])
    def reconcile(site: Website, ctx: polyop.Context) -> polyop.Result:
        return polyop.Result(desired_children=[config_map(site, model)], children_complete=True)

    got = Harness(sidecar).reconcile(website(replicas=2))
    assert not got.error
    assert got.desired_children == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site-settings", "namespace": "web"}, "data": {"image": "nginx"}}
    ]


def test_the_cluster_takes_and_gives_typed_built_in_objects() -> None:
    fake = FakeCluster()
    created = fake.create(ConfigMap(metadata=ObjectMeta(name="settings", namespace="web"), data={"a": "1"}))
    assert isinstance(created, ConfigMap) and created.metadata is not None and created.metadata.uid
    applied = fake.apply(ConfigMap(metadata=ObjectMeta(name="settings", namespace="web"), data={"a": "2"}))
    assert isinstance(applied, ConfigMap) and applied.data == {"a": "2"}
    got = fake.get(ConfigMap, "settings", "web")
    assert isinstance(got, ConfigMap) and got.data == {"a": "2"}
    assert fake.get("v1/ConfigMap", "settings", "web")["data"] == {"a": "2"}
    site = fake.create(Website.parse(website(replicas=2)))
    assert isinstance(site, Website) and fake.get(Website, "site", "web").spec.replicas == 2


def website(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "site", "namespace": "web"}, "spec": spec}
