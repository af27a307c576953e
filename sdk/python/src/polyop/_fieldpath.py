"""Field paths, as the host evaluates a declared index's ``path``, for
FakeCluster: the same small subset of JSONPath (fields, ``['quoted.name']``,
``[*]``, ``[N]`` and ``[?(@.field==literal)]``), documented in
docs/protocol.md, "Indexes"."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["compile_path"]

_NAME = re.compile(r"[A-Za-z0-9_$-]+")
_BRACKET = re.compile(
    r"""\[\*\]
      | \[(?P<item>\d+)\]
      | \[(?P<q>['"])(?P<quoted>[^'"]+)(?P=q)\]
      | \[\?\(@\.(?P<fpath>[A-Za-z0-9_$.-]+)\s*==\s*(?P<literal>[^)]+)\)\]
    """,
    re.VERBOSE,
)

_Step = Callable[[Any], list[Any]]


def compile_path(path: str) -> Callable[[Any], list[str]]:
    """The function giving an object's values at path, or ValueError saying
    where path is wrong."""
    text = path.strip()
    if not text:
        raise ValueError("empty field path")
    if text.endswith("."):
        raise ValueError(f"field path {path!r} ends with a dot")
    steps: list[_Step] = []
    i = 1 if text.startswith(".") else 0
    expect_field = True
    while i < len(text):
        if text[i] == "[":
            m = _BRACKET.match(text, i)
            if m is None:
                raise ValueError(f"field path {path!r}: {text[i:]!r} at offset {i} is not [*], [N], ['name'] or [?(@.field==value)]")
            steps.append(_step(m))
            i, expect_field = m.end(), False
        elif text[i] == "." and not expect_field:
            i, expect_field = i + 1, True
        elif expect_field and (n := _NAME.match(text, i)) is not None:
            steps.append(_field(n[0]))
            i, expect_field = n.end(), False
        else:
            raise ValueError(
                f"field path {path!r}: unexpected {text[i]!r} at offset {i}; "
                "quote a name with dots or slashes as ['name'], for example .metadata.labels['app.kubernetes.io/name']"
            )

    def values(obj: Any) -> list[str]:
        current = [obj]
        for step in steps:
            current = [v for c in current for v in step(c)]
        out: list[str] = []
        for v in current:
            for s in _scalars(v):
                if s and s not in out:
                    out.append(s)
        return out

    return values


def _field(name: str) -> _Step:
    return lambda v: [v[name]] if isinstance(v, dict) and name in v else []


def _step(m: re.Match[str]) -> _Step:
    if m["quoted"] is not None:
        return _field(m["quoted"])
    if m["item"] is not None:
        n = int(m["item"])
        return lambda v: [v[n]] if isinstance(v, list) and n < len(v) else []
    if m["fpath"] is not None:
        fpath = m["fpath"].split(".")
        want = _literal(m["literal"].strip())
        return lambda v: [item for item in v if _matches(item, fpath, want)] if isinstance(v, list) else []
    return lambda v: list(v) if isinstance(v, list) else []


def _literal(text: str) -> Any:
    if len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]:
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a literal (true, false, null, a number, or a quoted string)") from None


def _matches(item: Any, fpath: list[str], want: Any) -> bool:
    v = item
    for f in fpath:
        if not isinstance(v, dict) or f not in v:
            return False
        v = v[f]
    return bool(v == want and type(v) is type(want)) or (
        isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(want, (int, float)) and v == want
    )


def _scalars(v: Any) -> list[str]:
    if isinstance(v, list):
        return [s for item in v for s in _scalars(item) if not isinstance(item, list)]
    if isinstance(v, bool):
        return ["true" if v else "false"]
    if isinstance(v, (str, int, float)):
        return [str(v)]
    return []
