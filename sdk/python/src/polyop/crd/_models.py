"""The base models: :class:`Model` for a kind's parts, :class:`Resource` for the
kind itself, :class:`Condition` and :class:`StatusBase` for its status."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from typing_extensions import Self

from polyop import conditions as _conditions
from polyop.crd._markers import Format, ListMap

__all__ = ["Condition", "Model", "ObjectMeta", "Resource", "StatusBase"]


class Model(BaseModel):
    """The base of every model in a CRD: fields are ``snake_case`` in Python and
    ``camelCase`` in the object (``ready_replicas`` is ``readyReplicas``), a
    field's docstring is its description, and the object's fields the model
    does not name are ignored (the API server prunes them anyway)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        use_attribute_docstrings=True,
        extra="ignore",
    )

    def to_dict(self) -> dict[str, Any]:
        """The model as the object's JSON: camelCase, without the fields that are None."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ObjectMeta(Model):
    """An object's metadata. Every field the API server sends is kept (the model
    allows extra fields), so dumping it gives back what was parsed. Its schema in
    the CRD is ``type: object``: the API server owns it."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[dict[str, Any]] | None = None


class Resource(Model):
    """A kind: subclass it with ``spec`` and ``status`` fields and declare it
    with :func:`polyop.crd.kind`::

        @crd.kind(group="example.com", version="v1")
        class Widget(crd.Resource):
            \"\"\"A Widget runs a few replicas of a web server.\"\"\"

            spec: WidgetSpec
            status: WidgetStatus = Field(default_factory=WidgetStatus)

    :meth:`parse` reads an object the sidecar receives (a :class:`polyop.Object`
    or any mapping); :meth:`to_dict` gives it back as JSON, and
    :meth:`status_dict` the status alone.
    """

    __polyop_kind__: ClassVar[Any] = None

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def model_post_init(self, context: Any, /) -> None:
        info = type(self).__polyop_kind__
        if info is not None:
            if not self.api_version:
                self.api_version = info.api_version
            if not self.kind:
                self.kind = info.kind

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> Self:
        """Read an object (the API server's JSON as a dict) into the model.

        Raises pydantic.ValidationError when it does not fit the model, e.g. an
        object written before a field became required."""
        return cls.model_validate(obj)

    def status_dict(self) -> dict[str, Any]:
        """The ``status`` as the object's JSON, ``{}`` when the kind has none:
        assign it to the object the sidecar received, ``obj["status"] =
        widget.status_dict()``, for the host to write."""
        value = self.to_dict().get("status")
        return value if isinstance(value, dict) else {}


class Condition(Model):
    """Condition contains details for one aspect of the current state of this API Resource."""

    type: Annotated[str, Field(max_length=316, pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")]
    """The type of the condition, in CamelCase: Ready, Degraded, ..."""
    status: Literal["True", "False", "Unknown"]
    """The status of the condition: True, False or Unknown."""
    observed_generation: Annotated[int, Field(ge=0), Format("int64")] | None = None
    """The metadata.generation the condition was set for."""
    last_transition_time: Annotated[str, Format("date-time")]
    """When the condition last changed from one status to another (RFC 3339)."""
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")]
    """Why the condition last changed, in CamelCase, for machines."""
    message: Annotated[str, Field(max_length=32768)] = ""
    """Why the condition last changed, for people."""


class StatusBase(Model):
    """A status with the two fields every kind's status should have: the
    ``conditions`` (a list map keyed by type) and the ``observed_generation`` the
    status was computed for. Subclass it with the kind's own fields."""

    conditions: Annotated[list[Condition], ListMap("type")] = Field(default_factory=list)
    """The latest observations of the object's state."""
    observed_generation: Annotated[int, Format("int64")] | None = None
    """The metadata.generation this status was computed for."""

    def set_condition(
        self,
        type: str,
        status: _conditions.ConditionStatus,
        reason: str,
        message: str = "",
        *,
        observed_generation: int = 0,
        now: datetime | None = None,
    ) -> bool:
        """Add or update a condition, as :func:`polyop.set_condition` does, and
        report whether anything changed."""
        as_dicts = [c.to_dict() for c in self.conditions]
        changed = _conditions.set_condition(
            as_dicts, type, status, reason, message, observed_generation=observed_generation, now=now
        )
        if changed:
            self.conditions = [Condition.model_validate(c) for c in as_dicts]
        return changed

    def find_condition(self, type: str) -> Condition | None:
        """The condition of this type, or None."""
        return next((c for c in self.conditions if c.type == type), None)

    def remove_condition(self, type: str) -> bool:
        """Remove the condition of this type and report whether it was present."""
        kept = [c for c in self.conditions if c.type != type]
        removed = len(kept) != len(self.conditions)
        self.conditions = kept
        return removed
