"""Every name in the Python column of docs/vocabulary.md exists, with the signature the table gives it.

The table is the one vocabulary the Go, Python and TypeScript SDKs follow; a
name in backticks in the Python column is a dotted path from the ``polyop``
package (``polyop.Sidecar.serve``, ``polyop.testing.Harness``), checked here.
A span in backticks after a name that reads as a signature is checked against
the name's declaration: ``(conditions, type: str) -> bool`` is the callable's
own (read with :func:`inspect.signature` and :func:`typing.get_type_hints`);
``validator(obj, req: AdmissionRequest) -> Sequence[str] | None``, after a
registration, is the shape of the function it registers (read from the type
the registration accepts). Plain text is commentary.
"""

from __future__ import annotations

import collections.abc
import importlib
import inspect
import pathlib
import re
import types
import typing
from typing import Any

import pytest

VOCABULARY = pathlib.Path(__file__).resolve().parents[3] / "docs" / "vocabulary.md"

SIGNATURE = re.compile(r"^(?:(?P<role>[a-z_]+))?\((?P<params>.*)\)(?: -> (?P<returns>.+))?$")
"""A signature as the table writes it: an optional role (the registered function's), parameters, return type."""


def split_row(line: str) -> list[str]:
    """The cells of a table's row; "\\|" inside a cell (a type union) is a "|"."""
    return [c.strip().replace("\0", "|") for c in line.replace("\\|", "\0").strip().strip("|").split("|")]


def python_cells() -> list[tuple[str, str]]:
    """(concept, cell) for the Python cell of every row of every table."""
    cells: list[tuple[str, str]] = []
    column = None
    for line in VOCABULARY.read_text().splitlines():
        if not line.startswith("|"):
            column = None
            continue
        row = split_row(line)
        if column is None:
            assert "Python" in row, f"a table of {VOCABULARY} has no Python column: {line}"
            column = row.index("Python")
            continue
        if set(line) <= set("|- "):
            continue
        cells.append((row[0], row[column]))
    return cells


def is_signature(span: str) -> bool:
    return SIGNATURE.match(span) is not None and not span.startswith("polyop")


def python_names() -> list[tuple[str, str]]:
    """(concept, name) for every backticked name of the Python column."""
    return [
        (concept, span)
        for concept, cell in python_cells()
        for span in re.findall(r"`([^`]+)`", cell)
        if not is_signature(span)
    ]


def python_signatures() -> list[tuple[str, str, str]]:
    """(concept, name, signature) for every signature of the Python column, with the name before it."""
    out: list[tuple[str, str, str]] = []
    for concept, cell in python_cells():
        name = ""
        for span in re.findall(r"`([^`]+)`", cell):
            if not is_signature(span):
                name = span
                continue
            assert name.startswith("polyop"), f"{concept}: the signature `{span}` has no name before it"
            out.append((concept, name, span))
    return out


def resolve(path: str) -> Any:
    """The object a dotted path from the polyop package names: the longest
    importable module, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(path)


def render(t: Any) -> str:
    """A type as the table writes it: a class by its name, unions with |, generics with their arguments."""
    if t is None or t is type(None):
        return "None"
    if t is Any:
        return "Any"
    if isinstance(t, typing.TypeVar):
        return t.__name__
    if isinstance(t, typing.ForwardRef):
        return t.__forward_arg__
    if isinstance(t, str):
        return t
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(render(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is collections.abc.Callable:
        params, returns = args
        return f"Callable[[{', '.join(render(a) for a in params)}], {render(returns)}]"
    if origin is not None:
        return f"{render(origin)}[{', '.join(render(a) for a in args)}]"
    return getattr(t, "__name__", repr(t))


def split_params(params: str) -> list[str]:
    """The parameters of a signature, split at the commas outside brackets."""
    out, depth, current = [], 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
            continue
        depth += ch in "[("
        depth -= ch in "])"
        current += ch
    if current.strip():
        out.append(current.strip())
    return out


def declared_params(fn: Any) -> list[str]:
    """The parameters of fn as the table writes them, without types: names, with / and * where they go."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    out: list[str] = []
    kinds = [p.kind for p in params]
    for i, p in enumerate(params):
        if p.kind is inspect.Parameter.KEYWORD_ONLY and inspect.Parameter.VAR_POSITIONAL not in kinds and "*" not in out:
            out.append("*")
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            out.append("*" + p.name)
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            out.append("**" + p.name)
        else:
            out.append(p.name)
        following = kinds[i + 1] if i + 1 < len(kinds) else None
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and following is not inspect.Parameter.POSITIONAL_ONLY:
            out.append("/")
    return out


def hints(fn: Any) -> dict[str, Any]:
    target = fn.__init__ if inspect.isclass(fn) else fn
    return typing.get_type_hints(target)


def problems_of_callable(fn: Any, params: list[str], returns: str | None) -> list[str]:
    """How fn's declaration differs from the table's parameters and return type."""
    problems = []
    written = [p.split(":", 1)[0].strip() for p in params]
    if written != (declared := declared_params(fn)):
        problems.append(f"the parameters are ({', '.join(declared)})")
    declared_hints = hints(fn)
    for p in params:
        name, _, typ = p.partition(":")
        if typ and name.strip() in declared_hints and render(declared_hints[name.strip()]) != typ.strip():
            problems.append(f"{name.strip()} is a {render(declared_hints[name.strip()])}")
    if returns is not None and render(declared_hints.get("return")) != returns:
        problems.append(f"it returns {render(declared_hints.get('return'))}")
    return problems


def problems_of_registered(registration: Any, params: list[str], returns: str | None) -> list[str]:
    """How the functions registration accepts differ from the table's shape: one of the callables its
    type variable is bound to must take as many arguments, of the types written, and return the type written."""
    decorator = hints(registration).get("return")
    (accepted,) = typing.get_args(decorator)[0]
    assert isinstance(accepted, typing.TypeVar) and accepted.__bound__ is not None, f"{decorator} takes no bound type variable"
    bound = accepted.__bound__
    shapes = typing.get_args(bound) if typing.get_origin(bound) in (typing.Union, types.UnionType) else (bound,)
    for shape in shapes:
        args, result = typing.get_args(shape)
        if len(args) != len(params):
            continue
        typed = [p.partition(":")[2].strip() for p in params]
        if any(t and render(a) != t for a, t in zip(args, typed, strict=True)):
            continue
        if returns is None or render(result) == returns:
            return []
    return [f"it registers {' or '.join(render(s) for s in shapes)}"]


NAMES = [(concept, name) for concept, name in python_names() if name.startswith("polyop")]
ARGUMENTS = {name for _, name in python_names() if not name.startswith("polyop")}
"""The keyword arguments and fields the column names beside a name, such as `requeue_after`."""
SIGNATURES = python_signatures()


def test_the_table_has_a_python_column() -> None:
    assert len(NAMES) > 40, f"only {len(NAMES)} Python names read from {VOCABULARY}"
    assert len(SIGNATURES) >= 15, f"only {len(SIGNATURES)} Python signatures read from {VOCABULARY}"


@pytest.mark.parametrize(("concept", "name"), NAMES, ids=[name for _, name in NAMES])
def test_the_name_exists(concept: str, name: str) -> None:
    try:
        resolve(name)
    except (AttributeError, ModuleNotFoundError) as err:
        pytest.fail(f"{concept}: {name} does not exist ({err})")


@pytest.mark.parametrize(("concept", "name", "signature"), SIGNATURES, ids=[f"{n} {s}" for _, n, s in SIGNATURES])
def test_the_signature_is_declared(concept: str, name: str, signature: str) -> None:
    m = SIGNATURE.match(signature)
    assert m is not None
    params = split_params(m["params"])
    try:
        obj = resolve(name)
    except (AttributeError, ModuleNotFoundError) as err:
        pytest.fail(f"{concept}: {name} does not exist ({err})")
    if m["role"]:
        problems = problems_of_registered(obj, params, m["returns"])
    else:
        problems = problems_of_callable(obj, params, m["returns"])
    assert not problems, f"{concept}: the table says {name} is `{signature}`, but {'; '.join(problems)}"


def test_the_arguments_the_table_names_exist() -> None:
    import polyop
    import polyop.testing

    where: dict[str, Any] = {
        "requeue_after": polyop.Result,
        "desired_children": polyop.Result,
        "children_complete": polyop.Result,
        "retry_after": polyop.TemporaryError,
        "skip_unchanged_inputs": polyop.Sidecar.reconciler,
        **dict.fromkeys(["operation", "old", "dry_run", "subresource", "user"], polyop.testing.Harness.validate),
        **dict.fromkeys(["tracer_provider", "reflection", "reconcile_stream"], polyop.Sidecar.serve),
    }
    assert set(where) >= ARGUMENTS, f"the table names arguments this test does not check: {sorted(ARGUMENTS - set(where))}"
    for argument in ARGUMENTS:
        assert argument in inspect.signature(where[argument]).parameters, f"{where[argument].__qualname__} takes no {argument}"


def test_an_event_takes_type_reason_message_then_action() -> None:
    import polyop

    for event in (polyop.Context.event, polyop.AsyncContext.event):
        params = inspect.signature(event).parameters
        assert list(params)[1:4] == ["type", "reason", "message"]
        assert params["action"].kind is inspect.Parameter.KEYWORD_ONLY and params["action"].default == ""
