"""A reconcile or finalize function that takes the kind's model: the Sidecar
registers it with ``kind=`` a :class:`Resource` class and calls it through
:func:`typed_function`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from polyop.crd._models import Resource
from polyop.errors import TerminalError
from polyop.objects import Object

__all__ = ["typed_function"]


def typed_function(model: type[Resource], fn: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """Wrap ``fn(typed, ctx)`` as ``call(obj, ctx)``: the object is parsed into
    the model, and the model's status is written back into the object (even
    when fn raises, as a reconcile's status always is), for the host to write.

    An object that does not fit the model is a TerminalError naming the
    fields: retrying cannot change it, a new version of the object can."""

    def parse(obj: Object) -> Resource:
        try:
            return model.parse(obj)
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
            raise TerminalError(f"the object does not fit {model.__qualname__}: {problems}") from err

    if is_async:

        async def call_async(obj: Object, ctx: Any) -> Any:
            typed = parse(obj)
            try:
                return await fn(typed, ctx)
            finally:
                obj["status"] = typed.status_dict()

        return call_async

    def call(obj: Object, ctx: Any) -> Any:
        typed = parse(obj)
        try:
            return fn(typed, ctx)
        finally:
            obj["status"] = typed.status_dict()

    return call
