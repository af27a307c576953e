"""Handlers as the dispatch calls them: ``fn(obj, ctx)`` and ``fn(obj, req)``
with the object as it is, whatever form the user's function takes.

A handler registered with a :class:`polyop.crd.Resource` class gets the
object parsed into it. An object the model cannot read is the object's fault,
not the sidecar's: a reconcile's is a terminal error naming the fields; an
admission request's is a denial with one field error per problem, which the
API server answers as 422 Invalid, as its own validation does.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from polyop.admission import AdmissionRequest, DeniedError, FieldError
from polyop.crd import Resource
from polyop.errors import TerminalError
from polyop.objects import Object

__all__ = ["admission_function", "field_errors", "is_async", "typed_reconcile"]


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether fn is an ``async def`` function (a partial of one, or an
    object whose ``__call__`` is one), awaited on the event loop rather than
    run on a thread."""
    if inspect.iscoroutinefunction(fn):
        return True
    call: Any = fn
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(call.__call__)


def typed_reconcile(model: type[Resource] | None, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(typed, ctx)`` as ``call(obj, ctx)``: the object is parsed into the
    model, and the model's status is written back into the object (even when
    fn raises, as a reconcile's status always is), for the host to write.

    An object that does not fit the model is a TerminalError naming the
    fields: retrying cannot change it, a new version of the object can."""
    if model is None:
        return fn

    def parse(obj: Object) -> Resource:
        try:
            return model.parse(obj)
        except ValidationError as err:
            problems = "; ".join(f"{e.field}: {e.detail}" for e in field_errors(err))
            raise TerminalError(f"the object does not fit {model.__qualname__}: {problems}") from err

    if is_async(fn):

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


def admission_function(
    what: str, model: type[Resource] | None, fn: Callable[..., Any], *, defaulting: bool
) -> Callable[[Object, AdmissionRequest], Any]:
    """A defaulter's or validator's fn as ``call(obj, req)``.

    With a model, fn gets the object parsed into it; a defaulter's changes to
    the model are merged into the object (fields the model does not name are
    kept). A pydantic ValidationError, from that parse or from fn parsing the
    object itself, is a denial with its field errors. A validator that takes
    the request alone, ``validate(req)``, is the deprecated shape: it still
    works, with a DeprecationWarning when it is registered."""
    request_only = not defaulting and _positional_arity(fn) == 1
    if request_only:
        warnings.warn(
            f"{what}: a validator that takes the request alone is deprecated; take (obj, req), as a defaulter does",
            DeprecationWarning,
            stacklevel=4,
        )

    def arguments(obj: Object, req: AdmissionRequest) -> tuple[Any, ...]:
        if request_only:
            return (req,)
        return (model.parse(obj) if model is not None else obj, req)

    def done(obj: Object, args: tuple[Any, ...]) -> None:
        if defaulting and model is not None:
            _merge(obj, args[0].to_dict())

    if is_async(fn):

        async def call_async(obj: Object, req: AdmissionRequest) -> Any:
            try:
                args = arguments(obj, req)
                result = await fn(*args)
            except ValidationError as err:
                raise denial(err, req) from err
            done(obj, args)
            return result

        return call_async

    def call(obj: Object, req: AdmissionRequest) -> Any:
        try:
            args = arguments(obj, req)
            result = fn(*args)
        except ValidationError as err:
            raise denial(err, req) from err
        done(obj, args)
        return result

    return call


def denial(err: ValidationError, req: AdmissionRequest) -> DeniedError:
    """The denial of an object a model cannot read: one field error per problem."""
    name = f" {req.name!r}" if req.name else ""
    return DeniedError(f"{req.kind.kind}{name} is invalid: it does not fit {err.title}", field_errors(err))


def field_errors(err: ValidationError) -> list[FieldError]:
    """pydantic's errors as field errors: the location as a field path
    (``spec.ports[0].name``), a missing field Required, anything else Invalid
    with the value and pydantic's message."""
    out = []
    for e in err.errors(include_url=False):
        path = _field_path(e["loc"])
        if e["type"] == "missing":
            out.append(FieldError.required(path, str(e["msg"])))
        else:
            out.append(FieldError.invalid(path, _json_value(e.get("input")), str(e["msg"])))
    return out


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _json_value(value: Any) -> Any:
    """value when it is JSON (what the API server sent always is), else its text."""
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    return str(value)


def _merge(obj: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """Merge a model's dump into the object, keeping what the model does not name."""
    for key, value in changes.items():
        current = obj.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            _merge(current, value)
        else:
            obj[key] = value


def _positional_arity(fn: Callable[..., Any]) -> int | None:
    """How many positional arguments fn takes; None when any number."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params)
