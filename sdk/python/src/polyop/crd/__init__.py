"""CRDs from Python types: declare a kind with pydantic models, get its
CustomResourceDefinition, and read the objects the sidecar receives as models.

::

    from typing import Annotated, Literal
    from pydantic import Field
    from polyop import crd

    class WidgetSpec(crd.Model):
        replicas: Annotated[int, Field(ge=0, le=10)] = 1
        \"\"\"How many replicas to run.\"\"\"
        image: str

    class WidgetStatus(crd.StatusBase):
        replicas: int = 0

    @crd.kind(group="example.com", version="v1", short_names=["wd"],
              scale=crd.Scale(), printer_columns=[crd.PrinterColumn("Replicas", ".status.replicas", "integer")])
    class Widget(crd.Resource):
        \"\"\"A Widget runs a few replicas of a web server.\"\"\"

        spec: WidgetSpec
        status: WidgetStatus = Field(default_factory=WidgetStatus)

``python -m polyop.crd widget.api -o config/crd`` writes
``config/crd/example.com_widgets.yaml``. In a reconciler,
``Widget.parse(obj)`` gives the typed object and ``obj["status"] =
widget.status_dict()`` hands its status back to the host.

A model the API server would refuse (a field of any shape without
:class:`PreserveUnknownFields`, a union of several types, a model that contains
itself) raises :class:`SchemaError`, naming the field.
"""

from polyop.crd._crd import (
    build_crd,
    build_crds,
    find_kinds,
    schema_of,
    to_yaml,
    write_crds,
)
from polyop.crd._kind import KindInfo, PrinterColumn, Scale, kind, kind_info
from polyop.crd._markers import (
    EmbeddedResource,
    Format,
    Int32,
    Int64,
    IntOrString,
    ListMap,
    ListType,
    MapType,
    PreserveUnknownFields,
    Unstructured,
    Validation,
)
from polyop.crd._models import Condition, Model, ObjectMeta, Resource, StatusBase
from polyop.crd._schema import SchemaError

__all__ = [
    "Condition",
    "EmbeddedResource",
    "Format",
    "Int32",
    "Int64",
    "IntOrString",
    "KindInfo",
    "ListMap",
    "ListType",
    "MapType",
    "Model",
    "ObjectMeta",
    "PreserveUnknownFields",
    "PrinterColumn",
    "Resource",
    "Scale",
    "SchemaError",
    "StatusBase",
    "Unstructured",
    "Validation",
    "build_crd",
    "build_crds",
    "find_kinds",
    "kind",
    "kind_info",
    "schema_of",
    "to_yaml",
    "write_crds",
]
