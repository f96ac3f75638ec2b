"""Differences between two JSON documents, located and described the way a reviewer reads them."""

from __future__ import annotations

from typing import Any

import orjson

from kvlog.schema.walk import ANNOTATIONS

#: Stands for "no value here" on one side of a difference.
MISSING: Any = object()


def diff(old: Any, new: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any, Any]]:
    """Every place two JSON documents differ, as (pointer, old value, new value); absent values are ``MISSING``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in [*old, *(k for k in new if k not in old)]:
            out += diff(old.get(key, MISSING), new.get(key, MISSING), (*path, key))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [change for i, (a, b) in enumerate(zip(old, new, strict=True)) for change in diff(a, b, (*path, str(i)))]
    same = type(old) is type(new) and old == new
    return [] if same else [(path, old, new)]


def describe_change(pointer: tuple[str, ...], old: Any, new: Any) -> str:
    """Name the field a change is in and say what changed: ``field reserved_va_bytes: type changed from ...``."""
    fields: list[str] = []
    keyword: list[str] = []
    index = 0
    while index < len(pointer):
        if pointer[index] == "properties" and index + 1 < len(pointer):
            fields.append(pointer[index + 1])
            keyword = []
            index += 2
            continue
        keyword.append(pointer[index])
        index += 1
    where = f"field {'.'.join(fields)}" if fields else "schema root"
    what = "/".join(keyword) or "definition"
    if old is MISSING:
        return f"{where}: {what} added ({show(new)})"
    if new is MISSING:
        return f"{where}: {what} removed (was {show(old)})"
    kind = " (annotation)" if keyword and keyword[-1] in ANNOTATIONS else ""
    if isinstance(old, list) and isinstance(new, list):
        added, removed = [v for v in new if v not in old], [v for v in old if v not in new]
        if added or removed:  # a set-like list (required, enum, type): say which members changed
            parts = [f"added {', '.join(map(show, added))}"] * bool(added)
            parts += [f"removed {', '.join(map(show, removed))}"] * bool(removed)
            return f"{where}: {what}{kind}: {'; '.join(parts)}"
    return f"{where}: {what}{kind} changed from {show(old)} to {show(new)}"


def show(value: Any) -> str:
    """``value`` as compact JSON, cut short when long."""
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."
