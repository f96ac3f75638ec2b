"""Every field of every event a ``VmmArena`` emits, in each state and on each failure path.

The figures are chosen so that a wrong one cannot pass by accident: offsets that are not zero and
not granule-aligned, ranges whose start and size differ, batches out of address order.
"""

from __future__ import annotations

import pytest
from memory_helpers import own_fields, validated_events

from kvlog.memory import ArenaError, VmmArena
from kvlog.memory.host_backend import PAGE_SIZE

P = PAGE_SIZE
RESERVE = 64 * P


def test_waking_a_closed_arena_is_refused_with_an_error_event() -> None:
    """Every other operation on a closed arena's books emitted its refusal; wake raised silently."""
    with validated_events() as captured:
        arena = VmmArena.host(RESERVE)
        arena.commit(3 * P, P)
        arena.sleep()
        arena.close()
        with pytest.raises(ArenaError, match="wake refused: the arena is closed"):
            arena.wake()
    assert own_fields(captured[-1]) == {
        "event": "kv_arena.error",
        "schema_version": 1,
        "level": "error",
        "arena_id": arena.arena_id,
        "operation": "wake",
        "error": "the arena is closed",
        "committed_bytes": 0,
    }
