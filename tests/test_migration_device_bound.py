"""The device-memory bound: a pool larger than the device memory its rank stated in the same run is a VA upper bound.

One rule of the migration context, so ``kvlog migrate``, ``kvlog follow`` and the live handler decide it
alike. Only the same rank's and run's figure counts: another rank's device, or an earlier run's, says
nothing of this pool.
"""

from __future__ import annotations

import orjson
from migration_helpers import live, migrate, migrated, state

from kvlog.migration.context import CORRECTION, CORRECTION_VERSION
from kvlog.schema.catalog import default_catalog

SERVER_ARGS = "[2026-07-23 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-32B', tp_size=2)"


def load(rank: int, gb: str) -> str:
    return f"[2026-07-23 10:00:40 TP{rank}] Load weight begin. avail mem={gb} GB"


def pool(rank: int, gb: str, label: str = "") -> str:
    return (
        f"[2026-07-23 10:01:15 TP{rank}] {label}KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1779712, "
        f"K size: {gb} GB, V size: {gb} GB"
    )


def test_a_pool_larger_than_the_free_memory_at_load_begin_is_a_va_bound_with_that_line_as_evidence() -> None:
    out = migrate(SERVER_ARGS, load(0, "139.06"), pool(0, "109.66"), pool(0, "0.46"))
    assert state(out[2]) == ("va_upper_bound", "device-memory-bound", 2)
    evidence = out[2]["migrated"]["inferred"]["allocation_state"]["evidence"]  # type: ignore[index]
    assert evidence == (
        "the pool's 235493056840 bytes cannot be allocated: weights.load_begin states 149314538045 bytes of device "
        "memory (avail_bytes) on the same rank and run"
    )
    assert state(out[3])[0] == "allocated"  # the draft after it: drafts never use the VA path


def test_another_ranks_device_memory_does_not_bound_a_pool() -> None:
    out = migrate(SERVER_ARGS, load(0, "139.06"), pool(1, "109.66"), pool(0, "109.66"))
    assert state(out[2])[:2] == ("allocated", "v1-claims-allocated")  # TP1 stated no device memory
    assert state(out[3]) == ("va_upper_bound", "device-memory-bound", 2)


def test_an_earlier_runs_device_memory_does_not_bound_a_pool() -> None:
    """``server_args=`` starts a run for every rank; ``Load weight begin`` one of its rank, with its own figure."""
    restarted = migrate(load(0, "40.00"), SERVER_ARGS, pool(0, "36.88"))
    assert state(restarted[2])[:2] == ("allocated", "v1-claims-allocated")
    reloaded = migrate(load(0, "40.00"), load(0, "139.06"), pool(0, "36.88"))
    assert state(reloaded[2])[:2] == ("allocated", "v1-claims-allocated")
    same_run = migrate(load(0, "40.00"), pool(0, "36.88"))
    assert state(same_run[1]) == ("va_upper_bound", "device-memory-bound", 1)


def test_a_pool_the_printed_figures_allow_to_fit_is_not_bounded() -> None:
    """K+V of 36.88 GB each (to 0.01 GB) may be 73.75 GB; 73.75 GB free may be 73.755 GB: it may fit, 73.74 GB not."""
    assert state(migrate(load(0, "73.75"), pool(0, "36.88"))[1])[0] == "allocated"
    assert state(migrate(load(0, "73.74"), pool(0, "36.88"))[1]) == ("va_upper_bound", "device-memory-bound", 1)


def test_a_sub_pool_too_large_for_the_device_tells_its_whole_group() -> None:
    out = migrate(
        load(0, "10.00"),
        pool(0, "2.00", "SWA "),
        pool(0, "6.00", "Full "),
        "[2026-07-23 10:01:15 TP0] SWAKVPool mem usage: 16.00 GB, swa size: 1779712, full size: 1779712",
    )
    assert state(out[1]) == ("va_upper_bound", "sub-pools-are-va-bound", 3)  # the Full sub-pool's line
    assert state(out[2]) == ("va_upper_bound", "device-memory-bound", 1)
    assert state(out[3]) == ("va_upper_bound", "sub-pools-are-va-bound", 3)


def test_a_follower_decides_it_as_the_pool_is_read() -> None:
    """No later line is needed: once the rank's start-up ends, the pool is written as a VA bound, never as allocated."""
    events, _ = live(
        load(0, "139.06"),
        pool(0, "109.66"),
        "[2026-07-23 10:02:31 TP0] max_total_num_tokens=331776, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=2048, context_len=40960, available_gpu_mem=40.11 GB",
    )
    allocation = next(event for event in events if event["event"] == "kv_pool.allocation")
    assert state(allocation) == ("va_upper_bound", "device-memory-bound", 1)


def test_the_sub_pools_after_one_too_large_for_the_device_are_va_bounds_up_to_the_summary() -> None:
    out = migrate(
        load(0, "10.00"),
        pool(0, "6.00", "SWA "),
        pool(0, "2.00", "Full "),
        "[2026-07-23 10:01:15 TP0] SWAKVPool mem usage: 16.00 GB, swa size: 1779712, full size: 1779712",
        pool(0, "0.25"),
    )
    assert state(out[1]) == ("va_upper_bound", "device-memory-bound", 1)
    assert state(out[2]) == ("va_upper_bound", "sub-pools-are-va-bound", 2)
    assert state(out[3]) == ("va_upper_bound", "sub-pools-are-va-bound", 2)
    assert state(out[4])[0] == "allocated"  # the draft


def test_a_profiles_total_bounds_the_pools_of_kvlog_events_upgraded_from_v1() -> None:
    """A v1 pool event claims nothing; upgraded, it is told by the device total its rank's profile stated."""
    profile = {
        "event": "memory.profile",
        "schema_version": 1,
        "timestamp": "2026-07-23T10:00:00Z",
        "level": "info",
        "ranks": {"tp": 0},
        "total_bytes": 80 << 30,
        **dict.fromkeys(
            (
                "initial_usage_bytes",
                "peak_torch_bytes",
                "post_profile_usage_bytes",
                "non_torch_bytes",
                "kv_cache_bytes",
            ),
            1,
        ),
        "gpu_memory_utilization": 0.9,
    }
    allocation = {
        "event": "kv_pool.allocation",
        "schema_version": 1,
        "timestamp": "2026-07-23T10:00:01Z",
        "level": "info",
        "label": None,
        "layout": "mha",
        "dtype": "torch.bfloat16",
        "num_tokens": 10,
        "k_bytes": 50 << 30,
        "v_bytes": 50 << 30,
    }
    lines = [profile, {**allocation, "ranks": {"tp": 1}}, {**allocation, "ranks": {"tp": 0}}]
    out, _, _ = migrated(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    _, other_rank, same_rank = (orjson.loads(line) for line in out.splitlines())
    assert state(other_rank)[1] != "device-memory-bound"
    assert state(same_rank) == ("va_upper_bound", "device-memory-bound", 1)


def test_the_context_builds_the_newest_version_of_its_correction() -> None:
    assert default_catalog().latest(CORRECTION) == CORRECTION_VERSION
