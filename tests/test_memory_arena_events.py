"""Every field of every event a ``VmmArena`` emits, in each state and on each failure path.

The figures are chosen so that a wrong one cannot pass by accident: offsets that are not zero and
not granule-aligned, ranges whose start and size differ, batches out of address order.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
from memory_helpers import FaultyBackend, kernel_rss, mappings_in, own_fields, validated_events

from kvlog.memory import ArenaError, VmmArena
from kvlog.memory.arena import ArenaChange
from kvlog.memory.host_backend import PAGE_SIZE
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT

P = PAGE_SIZE
MIB = 1 << 20
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


def refusal(arena_id: str, operation: str, error: str, committed: int, **where: int) -> dict[str, object]:
    """A ``kv_arena.error`` as ``own_fields`` gives it; ``where`` holds its offset_bytes and nbytes, if any."""
    return {
        "event": "kv_arena.error",
        "schema_version": 1,
        "level": "error",
        "arena_id": arena_id,
        "operation": operation,
        "error": error,
        "committed_bytes": committed,
        **where,
    }


def batch(arena: VmmArena, name: str, *, count: int, offset: int, nbytes: int, requested: int) -> dict[str, object]:
    """A ``kv_arena.commit``/``decommit`` after which the books and the kernel both hold what the arena holds now."""
    return {
        "event": f"kv_arena.{name}",
        "schema_version": 2,
        "level": "info",
        "arena_id": arena.arena_id,
        "range_count": count,
        "offset_bytes": offset,
        "nbytes": nbytes,
        "requested_nbytes": requested,
        "committed_bytes": arena.committed_bytes,
        "measured_committed_bytes": kernel_rss(arena.base, arena.base + arena.reserved_va_bytes),
        "measurement_source": "smaps_rss",
    }


def ready(arena_id: str, reserved: int, granularity: int) -> dict[str, object]:
    return {
        "event": "kv_arena.ready",
        "schema_version": 2,
        "level": "info",
        "arena_id": arena_id,
        "backend": "host",
        "device": None,
        "reserved_va_bytes": reserved,
        "granularity_bytes": granularity,
        "handle_type": None,
    }


def test_ready_says_what_was_reserved_in_whole_granules_under_a_per_process_id() -> None:
    with validated_events() as captured:
        first = VmmArena.host(5 * P + 1)
        second = VmmArena.host(3 * MIB, granularity_bytes=2 * MIB)
    pid, number = first.arena_id.split("_")
    assert int(pid) == os.getpid() and second.arena_id == f"{pid}_{int(number) + 1}"
    assert [own_fields(event) for event in captured] == [
        ready(first.arena_id, 6 * P, P),
        ready(second.arena_id, 4 * MIB, 2 * MIB),
    ]
    assert (first.reserved_va_bytes, first.granularity_bytes, first.committed_bytes) == (6 * P, P, 0)
    assert (second.reserved_va_bytes, second.granularity_bytes) == (4 * MIB, 2 * MIB)
    assert first.backend.name == "host" and first.base % P == 0 and not first.closed and not first.asleep
    assert repr(first) == f"VmmArena({first.arena_id}, host, reserved_va={6 * P}, committed=0, open)"
    first.close()
    second.close()


LIMIT = ADDRESS_SPACE_LIMIT


@pytest.mark.parametrize(
    ("reserve", "where", "reason"),
    [
        (0, {}, "reserve_bytes 0 must be at least 1"),
        (LIMIT + 1, {}, f"reserve_bytes {LIMIT + 1} is larger than {LIMIT}, the most this platform can address"),
        (LIMIT, {"nbytes": LIMIT}, f"reservation size {LIMIT} is larger than {LIMIT - 2 * P}, the most allowed"),
    ],
)
def test_a_refused_reservation_says_why_and_the_size_only_once_it_is_known(
    reserve: int, where: dict[str, int], reason: str
) -> None:
    with validated_events() as captured, pytest.raises(ArenaError, match=re.escape(f"reserve refused: {reason}")):
        VmmArena.host(reserve)
    (event,) = captured
    assert event["arena_id"].startswith(f"{os.getpid()}_")
    assert own_fields(event) == refusal(event["arena_id"], "reserve", reason, 0, **where)


def test_a_backend_that_cannot_reserve_or_has_no_granularity_is_refused_with_an_event() -> None:
    failing, empty, fine = FaultyBackend(), FaultyBackend(), FaultyBackend()
    failing.fail("reserve")
    empty.granularity = 0
    fine.granularity = 1  # the smallest granularity there is: accepted
    with validated_events() as captured:
        with pytest.raises(ArenaError, match="reserve failed: EIO"):
            VmmArena(failing, 5 * P + 1)
        with pytest.raises(ArenaError, match="granularity 0 must be at least 1"):
            VmmArena(empty, 5 * P)
        arena = VmmArena(fine, 5 * P + 1)
    assert [own_fields(event) for event in captured] == [
        refusal(captured[0]["arena_id"], "reserve", "reserve failed: EIO (planted)", 0, nbytes=6 * P),
        refusal(captured[1]["arena_id"], "reserve", "the backend's granularity 0 must be at least 1", 0),
        ready(arena.arena_id, 5 * P + 1, 1),
    ]
    arena.close()


def test_commits_and_decommits_say_the_rounded_range_what_was_asked_and_the_books_after() -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit(3 * P + 5, 2 * P)  # [3P, 6P)
        assert own_fields(captured[-1]) == batch(arena, "commit", count=1, offset=3 * P, nbytes=3 * P, requested=2 * P)
        arena.commit(5 * P, 4 * P)  # [5P, 9P): only [6P, 9P) is new
        assert arena.committed_bytes == 6 * P
        assert own_fields(captured[-1]) == batch(arena, "commit", count=1, offset=5 * P, nbytes=4 * P, requested=4 * P)
        arena.decommit(4 * P + 1, P)  # [4P, 6P)
        assert arena.committed_runs == [(3 * P, 4 * P), (6 * P, 9 * P)]
        expected = batch(arena, "decommit", count=1, offset=4 * P, nbytes=2 * P, requested=P)
        assert own_fields(captured[-1]) == expected
        arena.decommit(4 * P + 1, P)  # nothing left there: the same range, the same books
        assert own_fields(captured[-1]) == expected
        for name, operation in (("commit", arena.commit), ("decommit", arena.decommit)):
            operation(7 * P + 1, 0)  # empty: no granule at all, at its rounded-down offset
            assert own_fields(captured[-1]) == batch(arena, name, count=1, offset=7 * P, nbytes=0, requested=0)
        assert arena.committed_bytes == 4 * P


def test_a_batch_is_one_event_with_its_lowest_offset_and_each_byte_counted_once() -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit_many([(20 * P + 1, 2 * P), (10 * P + 1, 3 * P), (11 * P, P)])  # [20P, 23P), [10P, 14P)
        assert arena.committed_runs == [(10 * P, 14 * P), (20 * P, 23 * P)]
        assert own_fields(captured[-1]) == batch(arena, "commit", count=3, offset=10 * P, nbytes=7 * P, requested=6 * P)
        arena.decommit_many([(21 * P, P), (10 * P + 1, P)])  # [21P, 22P), [10P, 12P)
        assert arena.committed_runs == [(12 * P, 14 * P), (20 * P, 21 * P), (22 * P, 23 * P)]
        expected = batch(arena, "decommit", count=2, offset=10 * P, nbytes=3 * P, requested=2 * P)
        assert own_fields(captured[-1]) == expected
        before = len(captured)
        arena.commit_many([])
        arena.decommit_many([], force=True)
        assert len(captured) == before, "an empty batch emits nothing"


@pytest.mark.parametrize("name", ["commit", "decommit"])
def test_a_range_past_the_reservation_is_refused_with_its_rounded_offset_and_size(name: str) -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit(0, 2 * P)
        single, many = getattr(arena, name), getattr(arena, f"{name}_many")
        with pytest.raises(ArenaError, match="goes past the"):
            single(RESERVE - P + 5, P)  # [RESERVE - P, RESERVE + P)
        with pytest.raises(ArenaError, match="goes past the"):
            single(0, RESERVE + 1)  # at offset 0, which the event must still carry
        with pytest.raises(ArenaError, match="goes past the"):
            many([(0, P), (RESERVE, 1)])
        single(RESERVE - P, P)  # ending exactly at the reservation's end: accepted
        reason = f"goes past the {RESERVE}-byte reservation"
        assert [own_fields(event) for event in captured[-4:-1]] == [
            refusal(
                arena.arena_id,
                name,
                f"[{RESERVE - P}, {RESERVE + P}) {reason}",
                2 * P,
                offset_bytes=RESERVE - P,
                nbytes=2 * P,
            ),
            refusal(arena.arena_id, name, f"[0, {RESERVE + P}) {reason}", 2 * P, offset_bytes=0, nbytes=RESERVE + P),
            refusal(
                arena.arena_id, name, f"[{RESERVE}, {RESERVE + P}) {reason}", 2 * P, offset_bytes=RESERVE, nbytes=P
            ),
        ]
        assert arena.committed_runs == [(0, 2 * P)] + [(RESERVE - P, RESERVE)] * (name == "commit")


def refused_operations(arena: VmmArena) -> list[tuple[str, Callable[[], object]]]:
    """Every operation on the books, each with a range it would refuse anyway: the state is checked first."""
    return [
        ("commit", lambda: arena.commit(-1, P)),
        ("commit", lambda: arena.commit_many([(0, P), (RESERVE, P)])),
        ("decommit", lambda: arena.decommit(-1, P)),
        ("decommit", lambda: arena.decommit_many([(0, P)], force=True)),
        ("sleep", arena.sleep),
    ]


def test_every_operation_on_a_sleeping_arena_is_refused_without_a_range() -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit(2 * P, 2 * P)
        with pytest.raises(ArenaError, match="wake refused: the arena is not asleep"):
            arena.wake()
        assert own_fields(captured[-1]) == refusal(arena.arena_id, "wake", "the arena is not asleep", 2 * P)
        arena.sleep()
        for operation, call in refused_operations(arena):
            with pytest.raises(ArenaError, match=f"{operation} refused: the arena is asleep"):
                call()
            assert own_fields(captured[-1]) == refusal(
                arena.arena_id, operation, "the arena is asleep; wake() it first", 0
            )
        assert repr(arena) == f"VmmArena({arena.arena_id}, host, reserved_va={RESERVE}, committed=0, asleep)"
        arena.wake()


def test_every_operation_on_a_closed_arena_is_refused_without_a_range() -> None:
    with validated_events() as captured:
        arena = VmmArena.host(RESERVE)
        arena.commit(2 * P, 2 * P)
        arena.close()
        for operation, call in [*refused_operations(arena), ("wake", arena.wake)]:
            with pytest.raises(ArenaError, match=f"{operation} refused: the arena is closed"):
                call()
            assert own_fields(captured[-1]) == refusal(arena.arena_id, operation, "the arena is closed", 0)
        for name, call in (("measure", arena.measure), ("tensor", lambda: arena.tensor(0, (1,), torch.uint8))):
            before = len(captured)
            with pytest.raises(ArenaError, match=f"^arena {arena.arena_id} is closed; {name} refused$"):
                call()
            assert len(captured) == before, "reading an arena emits nothing, not even a refusal"
        assert repr(arena) == f"VmmArena({arena.arena_id}, host, reserved_va={RESERVE}, committed=0, closed)"


def test_a_decommit_under_a_live_view_names_the_view_and_the_range_and_force_overrides_it() -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit(0, 16 * P)
        view = arena.tensor(4 * P, (2 * P,), torch.uint8)  # bytes [4P, 6P)
        arena.decommit(3 * P, P)  # ends where the view starts: allowed
        arena.decommit(6 * P, P)  # starts where the view ends: allowed
        with pytest.raises(ArenaError, match="live tensor view"):
            arena.decommit(5 * P + 1, P)  # [5P, 7P)
        uses = f"1 live tensor view(s) over [{4 * P}, {6 * P}) use bytes in [{5 * P}, {7 * P}); "
        advice = "drop every tensor, storage or array sharing them first (or sleep())"
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "decommit", uses + advice, 14 * P, offset_bytes=5 * P, nbytes=2 * P
        )
        with pytest.raises(ArenaError, match="live tensor view"):
            arena.close()
        still = f"1 live tensor view(s) over [{4 * P}, {6 * P}) still use the arena; "
        expected = refusal(
            arena.arena_id, "close", still + "drop every tensor, storage or array sharing them first", 14 * P
        )
        assert own_fields(captured[-1]) == expected
        arena.decommit(5 * P, P, force=True)  # the view's memory goes: force is for views no one uses yet
        assert own_fields(captured[-1]) == batch(arena, "decommit", count=1, offset=5 * P, nbytes=P, requested=P)
        del view


@pytest.mark.parametrize("views", [4, 5])
def test_a_refusal_names_the_first_four_views_and_counts_the_rest(views: int) -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit(0, 8 * P)
        held = [arena.tensor(index * P, (P,), torch.uint8) for index in range(views)]
        with pytest.raises(ArenaError, match="live tensor view"):
            arena.decommit(0, 8 * P)
        named = ", ".join(f"[{index * P}, {(index + 1) * P})" for index in range(4))
        more = " and 1 more" if views == 5 else ""
        assert captured[-1]["error"].startswith(f"{views} live tensor view(s) over {named}{more} use bytes in [0, ")
        del held


def test_close_says_what_it_released_once_and_a_sleeping_arena_releases_nothing_more() -> None:
    with validated_events() as captured:
        arena = VmmArena.host(RESERVE)
        arena.commit_many([(P, 2 * P), (10 * P, P)])
        arena.close()
        arena.close()
        sleeper = VmmArena.host(RESERVE)
        sleeper.commit(0, 4 * P)
        sleeper.sleep()
        sleeper.close()
    closed = [own_fields(event) for event in captured if event["event"] == "kv_arena.closed"]
    assert closed == [
        {
            "event": "kv_arena.closed",
            "schema_version": 1,
            "level": "info",
            "arena_id": arena.arena_id,
            "released_bytes": 3 * P,
        },
        {
            "event": "kv_arena.closed",
            "schema_version": 1,
            "level": "info",
            "arena_id": sleeper.arena_id,
            "released_bytes": 0,
        },
    ]
    assert arena.closed and sleeper.closed and not sleeper.asleep
    assert mappings_in(arena.base - P, arena.base + RESERVE + P) == 0


def faulty_arena() -> tuple[FaultyBackend, VmmArena]:
    backend = FaultyBackend()
    return backend, VmmArena(backend, RESERVE)


def books_match_kernel(arena: VmmArena) -> bool:
    return kernel_rss(arena.base, arena.base + arena.reserved_va_bytes) == arena.committed_bytes


def test_a_commit_that_fails_part_way_gives_back_what_it_mapped_and_names_the_failing_range() -> None:
    backend, arena = faulty_arena()
    with validated_events() as captured, arena:
        arena.commit(P, P)  # the batch maps the two gaps around this run, then fails
        backend.fail("map", arena.base + 16 * P)
        with pytest.raises(ArenaError, match="commit refused: map failed"):
            arena.commit_many([(0, 4 * P), (16 * P + 1, 2 * P)])  # [0, 4P), [16P, 19P)
        given_back = "map failed: EIO (planted); 2 range(s) this call had mapped were given back"
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "commit", given_back, P, offset_bytes=16 * P, nbytes=3 * P
        )
        assert arena.committed_runs == [(P, 2 * P)] and books_match_kernel(arena)

        backend.fail("unmap", arena.base + 2 * P)  # and now undoing one of those two fails as well
        with pytest.raises(ArenaError, match="its rollback failed too"):
            arena.commit_many([(0, 4 * P), (16 * P, 3 * P)])
        stays = (
            f"; except [{2 * P}, {4 * P}): its rollback failed too (unmap failed: EIO (planted)), it stays committed"
        )
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "commit", given_back + stays, 3 * P, offset_bytes=16 * P, nbytes=3 * P
        )
        assert arena.committed_runs == [(P, 4 * P)] and books_match_kernel(arena)

        backend.fail("map", arena.base + 32 * P, still_held=((arena.base + 33 * P, P),))
        with pytest.raises(ArenaError, match="could not be rolled back"):
            arena.commit(32 * P, 4 * P)
        nothing = "map failed: EIO (planted); 0 range(s) this call had mapped were given back"
        held = f"{nothing}; [{33 * P}, {34 * P}) could not be rolled back and stays committed"
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "commit", held, 4 * P, offset_bytes=32 * P, nbytes=4 * P
        )
        assert arena.committed_runs == [(P, 4 * P), (33 * P, 34 * P)] and books_match_kernel(arena)
        assert [e["event"] for e in captured].count("kv_arena.commit") == 1, "no failed commit says it committed"
        backend.faults.clear()


def test_rolling_back_a_batch_gives_back_only_the_gaps_it_mapped_not_the_runs_beside_them() -> None:
    backend, arena = faulty_arena()
    with validated_events(), arena:
        arena.commit_many([(P, P), (6 * P, 2 * P)])
        backend.fail("map", arena.base + 16 * P)
        with pytest.raises(ArenaError, match=r"2 range\(s\) this call had mapped were given back"):
            arena.commit_many([(4 * P, 2 * P), (2 * P, P), (16 * P, P)])  # maps [4P, 6P) and [2P, 3P), then fails
        assert arena.committed_runs == [(P, 2 * P), (6 * P, 8 * P)] and books_match_kernel(arena)
        backend.faults.clear()


def test_a_decommit_that_fails_part_way_keeps_on_the_books_exactly_what_is_still_held() -> None:
    backend, arena = faulty_arena()
    with validated_events() as captured, arena:
        arena.commit_many([(40 * P, 4 * P), (48 * P, 2 * P)])
        backend.fail("unmap", arena.base + 40 * P)
        with pytest.raises(ArenaError, match="decommit refused: unmap failed"):
            arena.decommit_many([(48 * P, 2 * P), (40 * P + 1, 3 * P)])  # the first range goes, the second fails
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "decommit", "unmap failed: EIO (planted)", 4 * P, offset_bytes=40 * P, nbytes=4 * P
        )
        assert arena.committed_runs == [(40 * P, 44 * P)] and books_match_kernel(arena)

        backend.fail("unmap", arena.base + 40 * P, still_held=((arena.base + 42 * P, P),))
        with pytest.raises(ArenaError, match="unmap failed"):
            arena.decommit(40 * P, 4 * P)
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "decommit", "unmap failed: EIO (planted)", P, offset_bytes=40 * P, nbytes=4 * P
        )
        assert arena.committed_runs == [(42 * P, 43 * P)] and books_match_kernel(arena)
        assert "kv_arena.decommit" not in [e["event"] for e in captured]
        backend.faults.clear()


def test_a_close_that_fails_says_so_and_can_be_retried() -> None:
    backend, arena = faulty_arena()
    with validated_events() as captured:
        arena.commit(2 * P, 2 * P)
        backend.fail("unmap", arena.base + 2 * P)
        with pytest.raises(ArenaError, match="close refused: unmap failed"):
            arena.close()
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "close", "unmap failed: EIO (planted)", 2 * P, offset_bytes=2 * P, nbytes=2 * P
        )
        backend.faults.clear()
        backend.fail("release", arena.base)
        with pytest.raises(ArenaError, match="close refused: release failed"):
            arena.close()
        assert own_fields(captured[-1]) == refusal(arena.arena_id, "close", "release failed: EIO (planted)", 0)
        assert not arena.closed and books_match_kernel(arena)
        backend.faults.clear()
        arena.close()
        assert own_fields(captured[-1]) == {
            "event": "kv_arena.closed",
            "schema_version": 1,
            "level": "info",
            "arena_id": arena.arena_id,
            "released_bytes": 0,  # the failed attempt had already given the memory back
        }


def test_sleep_and_wake_are_one_event_each_and_say_what_changed() -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit_many([(9 * P, P), (3 * P, 2 * P)])
        slept = arena.sleep()
        assert own_fields(captured[-1]) == batch(
            arena, "decommit", count=2, offset=3 * P, nbytes=3 * P, requested=3 * P
        )
        assert slept == ArenaChange(3 * P, 3 * P, "smaps_rss", captured[-1]["duration_us"])
        woken = arena.wake()
        assert own_fields(captured[-1]) == batch(arena, "commit", count=2, offset=3 * P, nbytes=3 * P, requested=3 * P)
        assert woken == ArenaChange(3 * P, 3 * P, "smaps_rss", captured[-1]["duration_us"])
        assert arena.committed_runs == [(3 * P, 5 * P), (9 * P, 10 * P)] and not arena.asleep


def test_each_duration_is_a_time_inside_its_call_and_above_zero() -> None:
    """``duration_us`` of a commit, a decommit, a sleep and a wake is time the call spent: it lies
    within the wall time measured around the whole call, in microseconds, and is above zero, since
    each of these calls made system calls on real memory.
    """
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        calls: dict[str, Callable[[], object]] = {
            "commit": lambda: arena.commit(3 * P, 8 * P),
            "decommit": lambda: arena.decommit(5 * P, 2 * P),
            "sleep": arena.sleep,
            "wake": arena.wake,
        }
        for name, call in calls.items():
            before = time.perf_counter()
            call()
            wall_us = (time.perf_counter() - before) * 1e6
            duration = captured[-1]["duration_us"]
            assert 0 < duration <= wall_us + 0.001, (name, duration, wall_us)  # + the rounding to a nanosecond


def test_sleeping_and_waking_an_empty_arena_changes_nothing_and_emits_nothing() -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        before = len(captured)
        slept = arena.sleep()
        assert arena.asleep
        woken = arena.wake()
        assert len(captured) == before
        assert (slept.bookkept_bytes, slept.measured_bytes, slept.measurement_source) == (0, 0, "smaps_rss")
        assert woken == ArenaChange(0, 0, "smaps_rss", 0)
        assert not arena.asleep


def test_a_sleep_that_fails_part_way_stays_asleep_and_wake_restores_everything() -> None:
    backend, arena = faulty_arena()
    with validated_events() as captured, arena:
        arena.commit_many([(0, 2 * P), (8 * P, 2 * P)])
        backend.fail("unmap", arena.base + 8 * P)
        with pytest.raises(ArenaError, match="sleep refused: unmap failed"):
            arena.sleep()
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "sleep", "unmap failed: EIO (planted)", 2 * P, offset_bytes=8 * P, nbytes=2 * P
        )
        assert arena.asleep and arena.committed_runs == [(8 * P, 10 * P)] and books_match_kernel(arena)
        with pytest.raises(ArenaError, match="not all committed"):
            arena.tensor(8 * P, (P,), torch.uint8)  # still backed, but the caller promised not to touch it
        backend.faults.clear()
        arena.wake()
        assert arena.committed_runs == [(0, 2 * P), (8 * P, 10 * P)] and books_match_kernel(arena)


def test_a_wake_that_fails_part_way_gives_back_what_it_mapped_and_stays_asleep() -> None:
    backend, arena = faulty_arena()
    with validated_events() as captured, arena:
        arena.commit_many([(0, 2 * P), (8 * P, 2 * P)])
        arena.sleep()
        backend.fail("map", arena.base + 8 * P)
        with pytest.raises(ArenaError, match="wake refused: map failed"):
            arena.wake()
        given_back = "map failed: EIO (planted); 1 range(s) this call had mapped were given back"
        assert own_fields(captured[-1]) == refusal(
            arena.arena_id, "wake", given_back, 0, offset_bytes=8 * P, nbytes=2 * P
        )
        assert arena.asleep and arena.committed_bytes == 0 and books_match_kernel(arena)
        backend.faults.clear()
        assert arena.wake().bookkept_bytes == 4 * P
        assert arena.committed_runs == [(0, 2 * P), (8 * P, 10 * P)] and books_match_kernel(arena)


def test_without_a_measurement_the_events_say_so_and_the_books_still_count() -> None:
    backend, arena = faulty_arena()
    backend.unmeasurable = True
    with validated_events() as captured, arena:
        arena.commit(P, P)
        event = own_fields(captured[-1])
        assert (event["committed_bytes"], event["measured_committed_bytes"]) == (P, None)
        assert "measurement_source" not in event
        assert arena.measure() is None
        slept = arena.sleep()
        assert (slept.bookkept_bytes, slept.measured_bytes, slept.measurement_source) == (P, None, None)
        woken = arena.wake()
        assert (woken.bookkept_bytes, woken.measured_bytes, woken.measurement_source) == (P, None, None)


def test_views_must_be_non_empty_aligned_inside_the_reservation_and_committed() -> None:
    with validated_events(), VmmArena.host(RESERVE) as arena:
        arena.commit(0, P)
        for offset, shape, dtype in [(0, (0,), torch.uint8), (0, (4, 0), torch.float32), (2, (1,), torch.float32)]:
            with pytest.raises(ArenaError, match="must be non-empty, aligned to"):
                arena.tensor(offset, shape, dtype, require_committed=False)
        with pytest.raises(ArenaError, match=f"inside the {RESERVE}-byte reservation"):
            arena.tensor(RESERVE - 4, (2,), torch.float32, require_committed=False)
        last_word = arena.tensor(RESERVE - 4, (1,), torch.float32, require_committed=False)  # ends at the end
        assert last_word.data_ptr() == arena.base + RESERVE - 4
        with pytest.raises(ArenaError, match=rf"bytes \[{P - 4}, {P + 4}\) are not all committed"):
            arena.tensor(P - 4, (2,), torch.float32)
        word = arena.tensor(4, (1,), torch.float32)
        assert word.data_ptr() == arena.base + 4
        del last_word, word


@pytest.mark.parametrize(
    ("offset", "shape", "dtype", "reason"),
    [
        (0, [4], torch.uint8, "shape must be a tuple of sizes, not [4]"),
        (0, (4,), "uint8", "dtype must be a torch.dtype, not 'uint8'"),
        (0, (2, -1), torch.uint8, "tensor refused: dimension 1 of the shape -1 must not be negative"),
        (-4, (1,), torch.uint8, "tensor refused: offset -4 must not be negative"),
    ],
)
def test_a_view_that_is_not_one_is_refused_naming_what_is_wrong(
    offset: int, shape: Any, dtype: Any, reason: str
) -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit(0, P)
        before = len(captured)
        with pytest.raises(ArenaError, match=f"^arena {arena.arena_id}: {re.escape(reason)}$"):
            arena.tensor(offset, shape, dtype)
        assert len(captured) == before


def test_a_backend_that_returns_a_copy_instead_of_a_view_is_refused() -> None:
    backend, arena = faulty_arena()
    backend.copies = True
    with validated_events(), arena:
        arena.commit(0, P)
        with pytest.raises(ArenaError, match="backend returned a copy, not a view at offset 8"):
            arena.tensor(8, (4,), torch.uint8)


@pytest.mark.parametrize("name", ["commit", "decommit"])
@pytest.mark.parametrize(
    ("ranges", "reason"),
    [
        (5, "ranges must be (offset, nbytes) pairs, not 5"),
        ([(0, P), (1, 2, 3)], "range 1 is not an (offset, nbytes) pair: (1, 2, 3)"),
        ([(0, P), (P, -1)], "range 1: size -1 must not be negative"),
    ],
)
def test_ranges_that_are_not_pairs_of_sizes_are_refused_naming_the_range(name: str, ranges: Any, reason: str) -> None:
    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        arena.commit(0, P)
        with pytest.raises(ArenaError, match=re.escape(f"{name} refused: {reason}")):
            getattr(arena, f"{name}_many")(ranges)
        assert own_fields(captured[-1]) == refusal(arena.arena_id, name, reason, P)
        assert arena.committed_runs == [(0, P)]
