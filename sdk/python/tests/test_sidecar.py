"""Registrations, and the Describe answer built from them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import polyop
from polyop import FailurePolicy, Operation, Owns, UpdateFilter, Watch
from polyop.testing import Harness
from polyop.v1alpha1 import admission_pb2, describe_pb2, types_pb2

WIDGET = "example.com/v1/Widget"


def nothing(obj: polyop.Object, ctx: polyop.Context) -> None:
    return None


def test_describe_is_built_from_the_registrations() -> None:
    sidecar = polyop.Sidecar("widget-operator")
    sidecar.reconciler(
        WIDGET,
        owns=[
            "v1/ConfigMap",
            Owns("apps/v1/Deployment", send_observed=True),
            Owns("batch/v1/Job", adopt=True, replace_on_immutable=True),
        ],
        watches=[Watch("v1/Secret", label="example.com/widget"), Watch("v1/Service", field_path="spec.serviceName")],
        update_filters=[UpdateFilter.GENERATION_CHANGED, UpdateFilter.GENERATION_CHANGED, UpdateFilter.LABELS_CHANGED],
        label_selector="tier=web",
        namespaces=["a", "b", "a"],
        max_concurrent_reconciles=4,
        finalizer="example.com/cleanup",
        skip_unchanged_inputs=True,
    )(nothing)
    sidecar.finalizer(WIDGET)(nothing)
    sidecar.reconciler(WIDGET, name="widget.audit")(nothing)
    sidecar.defaulter(WIDGET, operations=[Operation.CREATE])(lambda obj, req: None)
    sidecar.validator(WIDGET, failure_policy=FailurePolicy.IGNORE, timeout_seconds=5)(lambda obj, req: None)
    sidecar.validator("example.com/v2/Widget")(lambda obj, req: None)
    sidecar.converter(WIDGET, ["v1", "v2"])(lambda obj, v: obj)

    got = Harness(sidecar).describe()

    def gvk(group: str, version: str, kind: str) -> types_pb2.GroupVersionKind:
        return polyop.GVK(group, version, kind).to_proto()

    want = describe_pb2.DescribeResponse(
        protocol_version=describe_pb2.PROTOCOL_VERSION_V1ALPHA1,
        name="widget-operator",
        sdk_name="polyop-python",
        sdk_version=polyop.__version__,
        controllers=[
            describe_pb2.ControllerDescription(
                name="widget",
                for_kind=gvk("example.com", "v1", "Widget"),
                predicates=describe_pb2.Predicates(
                    update_filters=[describe_pb2.UPDATE_FILTER_GENERATION_CHANGED, describe_pb2.UPDATE_FILTER_LABELS_CHANGED],
                    label_selector="tier=web",
                ),
                namespaces=["a", "b"],
                max_concurrent_reconciles=4,
                owns=[
                    describe_pb2.OwnedKind(kind=gvk("", "v1", "ConfigMap")),
                    describe_pb2.OwnedKind(kind=gvk("apps", "v1", "Deployment"), send_observed=True),
                    describe_pb2.OwnedKind(kind=gvk("batch", "v1", "Job"), adopt=True, replace_on_immutable=True),
                ],
                watches=[
                    describe_pb2.Watch(kind=gvk("", "v1", "Secret"), label="example.com/widget"),
                    describe_pb2.Watch(kind=gvk("", "v1", "Service"), field_path="spec.serviceName"),
                ],
                finalizer="example.com/cleanup",
                skip_unchanged_inputs=True,
            ),
            describe_pb2.ControllerDescription(name="widget.audit", for_kind=gvk("example.com", "v1", "Widget")),
        ],
        webhooks=[
            admission_pb2.WebhookDescription(
                kind=gvk("example.com", "v1", "Widget"),
                default=True,
                validate=True,
                operations=[admission_pb2.OPERATION_CREATE],
                failure_policy=admission_pb2.FAILURE_POLICY_IGNORE,
                timeout_seconds=5,
            ),
            admission_pb2.WebhookDescription(kind=gvk("example.com", "v2", "Widget"), validate=True),
        ],
        conversions=[
            admission_pb2.ConversionDescription(kind=types_pb2.GroupKind(group="example.com", kind="Widget"), versions=["v1", "v2"])
        ],
    )
    assert got == want


def test_describe_remembers_the_cluster_address() -> None:
    sidecar = polyop.Sidecar("w")
    sidecar.reconciler(WIDGET)(nothing)
    assert sidecar.cluster is None
    Harness(sidecar).describe(cluster_address="unix:///tmp/cluster.sock")
    assert isinstance(sidecar.cluster, polyop.Cluster)


def register_twice(sidecar: polyop.Sidecar) -> None:
    sidecar.reconciler(WIDGET)(nothing)
    sidecar.reconciler(WIDGET)(nothing)


def validators_disagree(sidecar: polyop.Sidecar) -> None:
    sidecar.defaulter(WIDGET, timeout_seconds=3)(lambda obj, req: None)
    sidecar.validator(WIDGET, timeout_seconds=5)(lambda obj, req: None)


@pytest.mark.parametrize(
    ("register", "match"),
    [
        pytest.param(register_twice, "already registered", id="two controllers of one name are refused"),
        pytest.param(lambda sidecar: sidecar.reconciler(WIDGET, name="Widget")(nothing), "controller name", id="a name that is not DNS is refused"),
        pytest.param(lambda sidecar: sidecar.reconciler(WIDGET, namespaces=["A_b"])(nothing), "namespace", id="an invalid namespace is refused"),
        pytest.param(lambda sidecar: sidecar.reconciler(WIDGET, max_concurrent_reconciles=-1)(nothing), "max_concurrent", id="negative concurrency is refused"),
        pytest.param(lambda sidecar: sidecar.reconciler("Widget")(nothing), "group/version/Kind", id="a kind without a version is refused"),
        pytest.param(lambda sidecar: sidecar.finalizer(WIDGET)(nothing), "no controller", id="a finalizer needs its controller first"),
        pytest.param(
            lambda sidecar: (sidecar.reconciler(WIDGET)(nothing), sidecar.finalizer(WIDGET)(nothing)), "declares no finalizer",
            id="a finalizer needs the controller's finalizer name",
        ),
        pytest.param(lambda sidecar: sidecar.finalizer()(nothing), "not both", id="a finalizer names its controller"),
        pytest.param(lambda sidecar: sidecar.deleted(WIDGET)(nothing), "no controller", id="a deleted function needs its controller first"),
        pytest.param(
            lambda sidecar: (sidecar.reconciler(WIDGET)(nothing), sidecar.deleted(WIDGET)(nothing), sidecar.deleted(WIDGET)(nothing)),
            "already has one", id="a controller has one deleted function",
        ),
        pytest.param(validators_disagree, "disagree on timeout_seconds", id="a defaulter and a validator must agree"),
        pytest.param(lambda sidecar: sidecar.validator(WIDGET, timeout_seconds=31)(lambda o, r: None), "between 1 and 30", id="a long timeout is refused"),
        pytest.param(lambda sidecar: sidecar.converter("g.example/v1/K", ["v1"])(lambda o, v: o), "two versions", id="a converter needs two versions"),
        pytest.param(lambda sidecar: Watch("v1/Secret"), "exactly one", id="a watch maps in exactly one way"),
    ],
)
def test_registration_refuses(register: Callable[[polyop.Sidecar], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        register(polyop.Sidecar("w"))


def test_describe_refuses_a_sidecar_that_cannot_work() -> None:
    sidecar = polyop.Sidecar("w")
    with pytest.raises(ValueError, match="registers nothing"):
        sidecar.describe()
    sidecar.reconciler(WIDGET, finalizer="example.com/x")(nothing)
    with pytest.raises(ValueError, match="registers no clean-up"):
        sidecar.describe()


def test_sidecar_name_must_be_a_dns_label() -> None:
    with pytest.raises(ValueError, match="sidecar name"):
        polyop.Sidecar("Widget_Operator")


def test_decorators_return_the_function_unchanged() -> None:
    sidecar = polyop.Sidecar("w")
    assert sidecar.reconciler(WIDGET)(nothing) is nothing


def test_the_protocol_version_is_the_generated_enum() -> None:
    assert polyop.PROTOCOL_VERSION == describe_pb2.PROTOCOL_VERSION_V1ALPHA1
    assert describe_pb2.ProtocolVersion.Name(polyop.PROTOCOL_VERSION) == "PROTOCOL_VERSION_V1ALPHA1"


def test_the_sdk_version_is_the_packages() -> None:
    """polyop.__version__ is what pyproject.toml says and what the installed
    package's metadata says, so that DescribeResponse.sdk_version is true."""
    import importlib.metadata
    import pathlib
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    pyproject = pathlib.Path(__file__).parent.parent / "pyproject.toml"
    with pyproject.open("rb") as f:
        declared = tomllib.load(f)["project"]["version"]
    assert polyop.__version__ == declared == importlib.metadata.version("polyop")
    assert polyop.SDK_NAME == "polyop-python"
