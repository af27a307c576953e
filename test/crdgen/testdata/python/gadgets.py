"""Kinds for test/crdgen: every marker polyop.crd supports, in models the API server must accept."""

from __future__ import annotations

import datetime
import enum
from typing import Annotated, Literal

from pydantic import Field

from polyop import crd


class Tier(enum.Enum):
    """The service tier."""

    GOLD = "Gold"
    SILVER = "Silver"


class Port(crd.Model):
    """A named port."""

    name: Annotated[str, Field(min_length=1, max_length=15)]
    port: Annotated[crd.Int32, Field(ge=1, le=65535)]
    protocol: Literal["TCP", "UDP"] = "TCP"


class Limits(crd.Model):
    min: int = 0
    max: int = 10


class GadgetSpec(crd.Model):
    """What the gadget should be."""

    replicas: Annotated[crd.Int32, Field(ge=0, le=10)] = 1
    """How many replicas to run."""
    image: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[a-z0-9./:-]+$")]
    tier: Tier = Tier.SILVER
    mode: Literal["Fast", "Safe"] = "Safe"
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5
    step: Annotated[int, Field(multiple_of=5)] = 5
    ports: Annotated[list[Port], crd.ListMap("name"), Field(max_length=8)] = Field(default_factory=list)
    tags: Annotated[set[str], Field(max_length=4)] = Field(default_factory=set)
    args: Annotated[list[str], crd.ListType("atomic"), Field(min_length=0)] = Field(default_factory=list)
    labels: Annotated[dict[str, str], crd.MapType("granular")] = Field(default_factory=dict)
    max_surge: crd.IntOrString = "25%"
    template: crd.EmbeddedResource | None = None
    extra: crd.Unstructured | None = None
    start: datetime.datetime | None = None
    serial: Annotated[str, crd.Format("uuid")] | None = None
    size: crd.Int64 | None = None
    limits: Annotated[Limits, crd.Validation("self.min <= self.max", "min must not exceed max")] = Field(default_factory=Limits)


class GadgetStatus(crd.StatusBase):
    replicas: crd.Int32 = 0
    selector: str = ""


@crd.kind(
    group="python.crdgen.polyop.dev",
    version="v1",
    short_names=["gd"],
    categories=["polyop"],
    scale=crd.Scale(label_selector_path=".status.selector"),
    printer_columns=[
        crd.PrinterColumn("Replicas", ".spec.replicas", "integer"),
        crd.PrinterColumn("Ready", ".status.conditions[?(@.type==\"Ready\")].status"),
        crd.PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ],
)
class Gadget(crd.Resource):
    """A Gadget exercises every marker polyop.crd supports."""

    spec: GadgetSpec
    status: GadgetStatus = Field(default_factory=GadgetStatus)


@crd.kind(group="python.crdgen.polyop.dev", version="v1alpha1", kind="Gadget", storage=False, deprecated=True, deprecation_warning="python.crdgen.polyop.dev/v1alpha1 Gadget is deprecated; use v1")
class GadgetV1alpha1(crd.Resource):
    """A Gadget, as it was."""

    spec: GadgetSpec
    status: GadgetStatus = Field(default_factory=GadgetStatus)
