"""The host backend against the kernel's own books: real mmap, Rss read back from /proc/self/smaps."""

from __future__ import annotations

import gc
import random
import resource
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from memory_helpers import kernel_rss, last, mappings_in, validated_events

from kvlog.memory import ArenaError, VmmArena
from kvlog.memory.host_backend import PAGE_SIZE
from kvlog.memory.intervals import RunSet

GIB = 1 << 30
MIB = 1 << 20


def arena_rss(arena: VmmArena) -> int:
    return kernel_rss(arena.base, arena.base + arena.reserved_va_bytes)


def assert_books_match_kernel(arena: VmmArena, event: dict[str, object]) -> None:
    rss = arena_rss(arena)
    assert rss == arena.committed_bytes == event["committed_bytes"] == event["measured_committed_bytes"]
    assert event["measurement_source"] == "smaps_rss"


def test_scripted_sequence_keeps_books_kernel_and_events_equal_after_every_step() -> None:
    with validated_events() as captured:
        arena = VmmArena.host(16 * GIB)
        ready = last(captured, "kv_arena.ready")
        assert ready["reserved_va_bytes"] == 16 * GIB and ready["backend"] == "host"
        assert ready["granularity_bytes"] == PAGE_SIZE == arena.granularity_bytes
        assert arena_rss(arena) == 0 == arena.committed_bytes

        arena.commit(0, 64 * MIB)
        assert_books_match_kernel(arena, last(captured, "kv_arena.commit"))
        arena.commit(8 * GIB, 3 * MIB + 1)
        assert_books_match_kernel(arena, last(captured, "kv_arena.commit"))
        assert arena.committed_bytes == 67 * MIB + PAGE_SIZE

        view = arena.tensor(8 * GIB, (3 * MIB + 1,), torch.uint8)
        view.fill_(7)
        assert arena_rss(arena) == arena.committed_bytes

        arena.decommit(16 * MIB, 32 * MIB)
        assert_books_match_kernel(arena, last(captured, "kv_arena.decommit"))
        assert arena.committed_runs == [(0, 16 * MIB), (48 * MIB, 64 * MIB), (8 * GIB, 8 * GIB + 3 * MIB + PAGE_SIZE)]

        with pytest.raises(ArenaError, match="past the"):
            arena.commit(16 * GIB - MIB, 2 * MIB)
        error = last(captured, "kv_arena.error")
        assert error["operation"] == "commit" and error["level"] == "error"
        assert error["committed_bytes"] == arena.committed_bytes == arena_rss(arena)

        assert int(view.sum()) == 7 * (3 * MIB + 1)
        del view
        arena.close()
        closed = last(captured, "kv_arena.closed")
        assert closed["released_bytes"] == 35 * MIB + PAGE_SIZE
        assert mappings_in(arena.base, arena.base + 16 * GIB) == 0


def test_a_16_gib_reservation_adds_no_resident_memory() -> None:
    with validated_events(), VmmArena.host(16 * GIB) as arena:
        assert arena.reserved_va_bytes == 16 * GIB
        assert arena_rss(arena) == 0
        assert arena.measure() is not None and arena.measure().nbytes == 0  # type: ignore[union-attr]


def test_ranges_round_outwards_and_the_event_says_so() -> None:
    with validated_events() as captured, VmmArena.host(GIB) as arena:
        arena.commit(100, 5000)
        event = last(captured, "kv_arena.commit")
        assert (event["offset_bytes"], event["nbytes"], event["requested_nbytes"]) == (0, 2 * PAGE_SIZE, 5000)
        assert arena_rss(arena) == 2 * PAGE_SIZE
        arena.commit(3 * PAGE_SIZE + 1, 0)  # empty: rounds to nothing, not to a granule
        assert last(captured, "kv_arena.commit")["nbytes"] == 0
        assert arena.committed_bytes == 2 * PAGE_SIZE == arena_rss(arena)
        with pytest.raises(ArenaError, match="must not be negative"):
            arena.commit(-PAGE_SIZE, PAGE_SIZE)


def test_committing_twice_counts_once() -> None:
    with validated_events() as captured, VmmArena.host(GIB) as arena:
        arena.commit(0, 4 * MIB)
        arena.commit(2 * MIB, 4 * MIB)
        arena.commit(0, 6 * MIB)
        assert arena.committed_bytes == 6 * MIB == arena_rss(arena)
        commits = [e["committed_bytes"] for e in captured if e["event"] == "kv_arena.commit"]
        assert commits == [4 * MIB, 6 * MIB, 6 * MIB]
        arena.decommit(0, 6 * MIB)
        arena.decommit(0, 6 * MIB)
        assert arena.committed_bytes == 0 == arena_rss(arena)


def test_tensor_is_a_zero_copy_view_of_committed_memory() -> None:
    with validated_events(), VmmArena.host(GIB) as arena:
        arena.commit(0, MIB)
        a = arena.tensor(4096, (16, 8), torch.float32)
        b = arena.tensor(4096, (128,), torch.float32)
        assert a.data_ptr() == arena.base + 4096 == b.data_ptr()
        a[1, 2] = 3.5
        assert b[10].item() == 3.5
        with pytest.raises(ArenaError, match="not all committed"):
            arena.tensor(MIB - 4, (4,), torch.float32)
        with pytest.raises(ArenaError, match="inside the"):
            arena.tensor(GIB - 4, (4,), torch.float32)
        loose = arena.tensor(0, (4 * MIB,), torch.uint8, require_committed=False)
        assert loose.data_ptr() == arena.base
        del a, b, loose


def test_a_view_may_be_a_single_byte_anywhere_but_never_empty() -> None:
    """A one-element uint8 view (a flag, a scalar) is a view like any other, from the first byte to the last."""
    with validated_events(), VmmArena.host(MIB) as arena:
        arena.commit(0, MIB)
        last_byte = arena.tensor(MIB - 1, (1,), torch.uint8)
        scalar = arena.tensor(0, (), torch.uint8)
        assert last_byte.data_ptr() == arena.base + MIB - 1 and scalar.data_ptr() == arena.base
        last_byte.fill_(5)
        scalar.fill_(9)
        whole = arena.tensor(0, (MIB,), torch.uint8)
        assert (whole[MIB - 1].item(), whole[0].item(), int(whole.sum())) == (5, 9, 14)
        for empty in [(0,), (4, 0)]:
            with pytest.raises(ArenaError, match="must be non-empty"):
                arena.tensor(0, empty, torch.uint8)
        del last_byte, whole
        with pytest.raises(ArenaError, match=r"1 live tensor view\(s\) over \[0, 1\) use bytes"):
            arena.decommit(0, PAGE_SIZE)
        with pytest.raises(ArenaError, match=r"1 live tensor view\(s\) over \[0, 1\) still use the arena"):
            arena.close()
        cycle: list[object] = [scalar]
        cycle.append(cycle)
        del scalar, cycle
        arena.close()  # only a reference cycle keeps the view: it is not in use
        assert arena.closed


def test_views_made_used_and_dropped_step_after_step_keep_working() -> None:
    """A serving loop's pattern: many more short-lived views than the arena ever keeps books of at once."""
    with validated_events(), VmmArena.host(MIB) as arena:
        arena.commit(0, MIB)
        for step in range(300):
            view = arena.tensor(step * PAGE_SIZE % MIB, (PAGE_SIZE,), torch.uint8)
            view.fill_(step % 251)
            del view
        assert arena.tensor(299 * PAGE_SIZE % MIB, (1,), torch.uint8).item() == 299 % 251
        arena.decommit(0, MIB)  # no view is alive
        assert arena.committed_bytes == 0 == arena_rss(arena)


def test_decommit_under_a_live_view_is_refused_even_through_a_derived_view() -> None:
    with validated_events() as captured, VmmArena.host(GIB) as arena:
        arena.commit(0, 4 * MIB)
        part = arena.tensor(MIB, (MIB,), torch.uint8)[10:20]  # only a slice of the returned view survives
        gc.collect()
        with pytest.raises(ArenaError, match="live tensor view"):
            arena.decommit(0, 2 * MIB)
        assert last(captured, "kv_arena.error")["operation"] == "decommit"
        assert arena.committed_bytes == 4 * MIB == arena_rss(arena)
        arena.decommit(2 * MIB, 2 * MIB)  # outside the view: allowed
        with pytest.raises(ArenaError, match="live tensor view"):
            arena.close()
        del part
        arena.decommit(0, 2 * MIB)
        assert arena.committed_bytes == 0 == arena_rss(arena)


def test_use_after_close_is_refused() -> None:
    with validated_events() as captured:
        arena = VmmArena.host(GIB)
        arena.commit(0, MIB)
        arena.close()
        arena.close()  # closing twice is harmless
        with pytest.raises(ArenaError, match="closed"):
            arena.commit(-1, MIB)  # even a bad request gets a valid error event
        with pytest.raises(ArenaError, match="closed"):
            arena.commit(0, MIB)
        assert last(captured, "kv_arena.error")["operation"] == "commit"
        with pytest.raises(ArenaError, match="closed"):
            arena.decommit(0, MIB)
        with pytest.raises(ArenaError, match="closed"):
            arena.tensor(0, (4,), torch.uint8)
        with pytest.raises(ArenaError, match="closed"):
            arena.measure()


def test_concurrent_commits_and_decommits_keep_exact_books() -> None:
    threads, rounds, region = 8, 40, 64 * MIB
    with validated_events() as captured, VmmArena.host(threads * region) as arena:
        kept: list[int] = [0] * threads

        def work(index: int) -> None:
            rng = random.Random(index)
            base = index * region
            for _ in range(rounds):
                size = rng.randrange(1, 16) * MIB
                arena.commit(base, size)
                arena.decommit(base + size // 2, region - size // 2)
            kept[index] = size // 2

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert arena.committed_bytes == sum(kept) == arena_rss(arena)
        operations = [e for e in captured if e["event"] in ("kv_arena.commit", "kv_arena.decommit")]
        assert len(operations) == 2 * threads * rounds
        assert operations[-1]["committed_bytes"] == arena.committed_bytes


def test_a_real_out_of_memory_half_way_through_a_commit_rolls_back() -> None:
    """RLIMIT_DATA makes mprotect(PROT_WRITE) fail with ENOMEM for real once the limit is reached."""
    with validated_events() as captured, VmmArena.host(GIB) as arena:
        arena.commit(64 * MIB, 64 * MIB)  # the commit below must map two gaps around this run
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        data = vm_data_bytes()
        resource.setrlimit(resource.RLIMIT_DATA, (data + 96 * MIB, hard))
        try:
            with pytest.raises(ArenaError, match="ENOMEM") as refused:
                arena.commit(0, 512 * MIB)  # gap [0, 64 MiB) fits under the limit, gap [128, 512 MiB) does not
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        assert "1 range(s) this call had mapped were given back" in str(refused.value)
        error = last(captured, "kv_arena.error")
        assert (error["operation"], error["offset_bytes"], error["nbytes"]) == ("commit", 0, 512 * MIB)
        assert error["committed_bytes"] == 64 * MIB == arena.committed_bytes == arena_rss(arena)
        assert arena.committed_runs == [(64 * MIB, 128 * MIB)]
        arena.commit(0, 512 * MIB)  # with the limit lifted the same commit succeeds
        assert arena.committed_bytes == 512 * MIB == arena_rss(arena)


def vm_data_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmData in /proc/self/status")


def test_commit_many_is_all_or_nothing() -> None:
    with validated_events() as captured, VmmArena.host(GIB) as arena:
        with pytest.raises(ArenaError, match="past the"):
            arena.commit_many([(0, MIB), (GIB - MIB, 2 * MIB)])
        assert arena.committed_bytes == 0 == arena_rss(arena)
        arena.commit_many([(0, MIB), (GIB - MIB, MIB)])
        assert arena.committed_bytes == 2 * MIB == arena_rss(arena)
        (commit,) = [e for e in captured if e["event"] == "kv_arena.commit"]
        assert batch_fields(commit) == {
            "arena_id": arena.arena_id,
            "range_count": 2,
            "offset_bytes": 0,
            "nbytes": 2 * MIB,
            "requested_nbytes": 2 * MIB,
            "committed_bytes": 2 * MIB,
            "measured_committed_bytes": arena_rss(arena),
            "measurement_source": "smaps_rss",
        }


def batch_fields(event: dict[str, object]) -> dict[str, object]:
    """A commit or decommit event's own fields but its duration, which must be a time (checked here)."""
    duration = event["duration_us"]
    assert isinstance(duration, float) and duration >= 0
    skipped = {"event", "schema_version", "timestamp", "level", "pid", "ranks", "duration_us"}
    return {key: value for key, value in event.items() if key not in skipped}


def test_decommit_many_is_one_event_for_the_batch_and_refuses_under_a_view_before_unmapping_anything() -> None:
    with validated_events() as captured, VmmArena.host(GIB) as arena:
        arena.commit_many([(0, 8 * MIB), (16 * MIB, 8 * MIB), (64 * MIB, 4 * MIB)])
        view = arena.tensor(64 * MIB, (MIB,), torch.uint8)
        with pytest.raises(ArenaError, match="live tensor view"):
            arena.decommit_many([(0, 2 * MIB), (64 * MIB, MIB)])
        assert arena.committed_bytes == 20 * MIB == arena_rss(arena), "nothing was given back"
        del view
        # unaligned, overlapping and out of order: rounded outwards, each byte counted once
        arena.decommit_many([(16 * MIB + 1, 2 * MIB), (MIB, 2 * MIB), (16 * MIB, MIB), (64 * MIB, 4 * MIB)])
        (decommit,) = [e for e in captured if e["event"] == "kv_arena.decommit"]
        assert batch_fields(decommit) == {
            "arena_id": arena.arena_id,
            "range_count": 4,
            "offset_bytes": MIB,
            "nbytes": 2 * MIB + 2 * MIB + PAGE_SIZE + 4 * MIB,
            "requested_nbytes": 2 * MIB + 2 * MIB + MIB + 4 * MIB,
            "committed_bytes": 20 * MIB - (8 * MIB + PAGE_SIZE),
            "measured_committed_bytes": 20 * MIB - (8 * MIB + PAGE_SIZE),
            "measurement_source": "smaps_rss",
        }
        assert arena.committed_bytes == arena_rss(arena) == decommit["committed_bytes"]
        arena.decommit_many([])
        assert [e["event"] for e in captured].count("kv_arena.decommit") == 1, "an empty batch does nothing"


def test_sleep_frees_memory_under_live_views_and_wake_restores_it() -> None:
    with validated_events() as captured, VmmArena.host(GIB) as arena:
        arena.commit(0, 8 * MIB)
        arena.commit(32 * MIB, 8 * MIB)
        view = arena.tensor(0, (8 * MIB,), torch.uint8)
        view.fill_(1)
        address = view.data_ptr()
        slept = arena.sleep()
        assert slept.bookkept_bytes == 16 * MIB == slept.measured_bytes
        assert arena.asleep and arena.committed_bytes == 0 == arena_rss(arena)
        (decommit,) = [e for e in captured if e["event"] == "kv_arena.decommit"]  # one event for both runs
        assert batch_fields(decommit) == {
            "arena_id": arena.arena_id,
            "range_count": 2,
            "offset_bytes": 0,
            "nbytes": 16 * MIB,
            "requested_nbytes": 16 * MIB,
            "committed_bytes": 0,
            "measured_committed_bytes": 0,
            "measurement_source": "smaps_rss",
        }
        assert decommit["duration_us"] == slept.duration_us
        with pytest.raises(ArenaError, match="asleep"):
            arena.commit(0, MIB)
        with pytest.raises(ArenaError, match="asleep"):
            arena.sleep()
        woken = arena.wake()
        assert woken.bookkept_bytes == 16 * MIB == woken.measured_bytes
        assert batch_fields(last(captured, "kv_arena.commit")) == {
            "arena_id": arena.arena_id,
            "range_count": 2,
            "offset_bytes": 0,
            "nbytes": 16 * MIB,
            "requested_nbytes": 16 * MIB,
            "committed_bytes": 16 * MIB,
            "measured_committed_bytes": 16 * MIB,
            "measurement_source": "smaps_rss",
        }
        assert [e["event"] for e in captured].count("kv_arena.commit") == 3, "two commits, then one for the wake"
        assert arena.committed_runs == [(0, 8 * MIB), (32 * MIB, 40 * MIB)]
        assert arena.committed_bytes == 16 * MIB == arena_rss(arena)
        assert view.data_ptr() == address and int(view.sum()) == 0  # same addresses, zeroed memory
        with pytest.raises(ArenaError, match="not asleep"):
            arena.wake()
        del view


def test_granularity_may_be_a_multiple_of_the_page() -> None:
    with validated_events() as captured, VmmArena.host(GIB, granularity_bytes=2 * MIB) as arena:
        arena.commit(3 * MIB, 1)
        event = last(captured, "kv_arena.commit")
        assert (event["offset_bytes"], event["nbytes"]) == (2 * MIB, 2 * MIB)
        assert arena_rss(arena) == 2 * MIB
    with pytest.raises(ArenaError, match="multiple of the page size"):
        VmmArena.host(GIB, granularity_bytes=PAGE_SIZE + 1)


def test_adjacent_arenas_are_measured_apart() -> None:
    """Guard pages keep the kernel from merging two arenas' mappings into one unattributable VMA."""
    with validated_events():
        arenas = [VmmArena.host(64 * MIB) for _ in range(4)]
        for index, arena in enumerate(arenas):
            arena.commit(0, 64 * MIB)
            arena.decommit(0, index * 16 * MIB)
        for index, arena in enumerate(arenas):
            assert arena_rss(arena) == (64 - index * 16) * MIB == arena.measure().nbytes  # type: ignore[union-attr]
            arena.close()


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 60), st.integers(0, 8)), max_size=40))
def test_run_set_matches_a_set_of_granules(operations: list[tuple[bool, int, int]]) -> None:
    runs, model = RunSet(), set[int]()
    for add, start, length in operations:
        end = start + length
        assert runs.gaps(start, end) == spans(set(range(start, end)) - model)
        assert runs.covered(start, end) == spans(set(range(start, end)) & model)
        if add:
            runs.add(start, end)
            model |= set(range(start, end))
        else:
            runs.remove(start, end)
            model -= set(range(start, end))
        assert runs.runs() == spans(model)
        assert runs.total == len(model)


def spans(granules: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for granule in sorted(granules):
        if out and out[-1][1] == granule:
            out[-1] = (out[-1][0], granule + 1)
        else:
            out.append((granule, granule + 1))
    return out
