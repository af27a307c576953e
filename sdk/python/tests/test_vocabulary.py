"""Every name in the Python column of docs/vocabulary.md exists.

The table is the one vocabulary the Go, Python and TypeScript SDKs follow; a
name in backticks in the Python column is a dotted path from the ``polyop``
package (``polyop.Sidecar.serve``, ``polyop.testing.Harness``), checked here.
Plain text is commentary.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re
from typing import Any

import pytest

VOCABULARY = pathlib.Path(__file__).resolve().parents[3] / "docs" / "vocabulary.md"


def python_names() -> list[tuple[str, str]]:
    """(concept, name) for every backticked name of the Python column."""
    names: list[tuple[str, str]] = []
    column = None
    for line in VOCABULARY.read_text().splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if column is None:
            if "Python" in cells:
                column = cells.index("Python")
            continue
        if set(line) <= set("|- "):
            continue
        for name in re.findall(r"`([^`]+)`", cells[column]):
            names.append((cells[0], name))
    return names


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


NAMES = [(concept, name) for concept, name in python_names() if name.startswith("polyop")]
ARGUMENTS = {name for _, name in python_names() if not name.startswith("polyop")}
"""The keyword arguments and fields the column names beside a name, such as `requeue_after`."""


def test_the_table_has_a_python_column() -> None:
    assert len(NAMES) > 40, f"only {len(NAMES)} Python names read from {VOCABULARY}"


@pytest.mark.parametrize(("concept", "name"), NAMES, ids=[name for _, name in NAMES])
def test_the_name_exists(concept: str, name: str) -> None:
    try:
        resolve(name)
    except (AttributeError, ModuleNotFoundError) as err:
        pytest.fail(f"{concept}: {name} does not exist ({err})")


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
