"""Named Python hooks: the logic a migration step needs that the declarative operations cannot say.

A step refers to a hook by name (``{ op = "hook", name = "..." }``); every hook is registered here,
in one place, so a reviewer sees all the imperative code the migration chain can run.
A hook changes the event in place and may raise ``ValueError`` to reject it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Hook = Callable[[dict[str, Any]], None]

_ARENA_PID = re.compile(r"^([0-9]{1,10})_[0-9]{1,10}$")


def pid_from_arena_id(event: dict[str, Any]) -> None:
    """Since the 2026-08 fix sglang names arenas ``<pid>_<n>``: the emitting process's pid, for the envelope."""
    match = _ARENA_PID.match(str(event.get("arena_id", "")))
    if match is not None and "pid" not in event:
        event["pid"] = int(match.group(1))


def deficit_from_sign(event: dict[str, Any]) -> None:
    """``kv_pool.memory_available`` v2: a negative budget for the KV cache is a deficit (the sign of a difference).

    No declarative operation compares a figure with zero; a line says only the figure, with its sign.
    """
    if "deficit" not in event:
        figure = event.get("available_bytes")
        event["deficit"] = isinstance(figure, int) and not isinstance(figure, bool) and figure < 0


HOOKS: dict[str, Hook] = {"pid_from_arena_id": pid_from_arena_id, "deficit_from_sign": deficit_from_sign}
