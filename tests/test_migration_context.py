"""Per-rank context: what one line cannot say, told by the lines around it on the same rank and run."""

from __future__ import annotations

import io

import orjson
import pytest
from migration_helpers import POOL_V1, committed, live, migrate, state

from kvlog.migration import engine, load_chain
from kvlog.migration.engine import MigrateOptions, Migrator

CHAIN = load_chain()
ARENA = "KvVmmArena[0] ready: device=0 reserved=20.0 GiB granularity=2048 KiB"
POOL = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 9.00 GB, V size: 9.00 GB"
DRAFT = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 0.50 GB, V size: 0.50 GB"
SIZED = "Post-capture KV sizing: max_total_num_tokens=800, free memory=3.00 GB"


def test_an_arena_line_makes_the_next_pool_a_va_bound_and_a_draft_stays_allocated() -> None:
    out = migrate(
        f"[t TP0] {ARENA}",
        f"[2026-07-21 09:00:00 TP0] {ARENA}",
        f"[2026-07-21 09:00:01 TP0] {POOL}",
        f"[2026-07-21 09:00:01 TP0] {DRAFT}",
    )
    assert state(out[2]) == ("va_upper_bound", "arena-before-pool", 2)
    assert state(out[3]) == ("allocated", "v1-claims-allocated", None)
    assert out[0] == f"[t TP0] {ARENA}".encode()


def test_evidence_is_per_rank() -> None:
    out = migrate(
        f"[2026-07-21 09:00:00 TP1] {ARENA}",
        f"[2026-07-21 09:00:01 TP0] {POOL}",
        f"[2026-07-21 09:00:01 DP0 TP1] {POOL}",
        f"[2026-07-21 09:00:01 TP1] {POOL}",
    )
    assert state(out[1])[0] == "allocated"
    assert state(out[2])[0] == "allocated"
    assert state(out[3]) == ("va_upper_bound", "arena-before-pool", 1)


@pytest.mark.parametrize(
    "restart",
    [
        "[2026-07-21 09:00:00] server_args=ServerArgs(tp_size=1)",
        "[2026-07-21 09:00:00 TP0] Load weight begin. avail mem=70.00 GB",
    ],
)
def test_a_restart_forgets_the_arenas(restart: str) -> None:
    out = migrate(f"[2026-07-21 09:00:00 TP0] {ARENA}", restart, f"[2026-07-21 09:00:01 TP0] {POOL}")
    assert state(out[2]) == ("allocated", "v1-claims-allocated", None)


def test_hybrid_sub_pools_and_their_summary() -> None:
    out = migrate(
        f"[2026-08-01 00:00:00 TP0] {ARENA}",
        f"[2026-08-01 00:00:00 TP0] {ARENA.replace('[0]', '[1]')}",
        "[2026-08-01 00:00:00 TP0] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 10, K size: 1.00 GB, "
        "V size: 1.00 GB",
        "[2026-08-01 00:00:00 TP0] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 20, K size: 2.00 GB, "
        "V size: 2.00 GB",
        "[2026-08-01 00:00:00 TP0] SWAKVPool mem usage: 6.00 GB, swa size: 10, full size: 20",
    )
    assert state(out[2]) == ("va_upper_bound", "arena-before-pool", 1)
    assert state(out[3]) == ("va_upper_bound", "arena-before-pool", 2)
    assert state(out[4]) == ("va_upper_bound", "sub-pools-are-va-bound", 3)
    assert out[4]["total_bytes"] == 6 << 30  # type: ignore[index]


def test_a_later_post_capture_line_tells_and_holds_back_only_what_it_must() -> None:
    out = migrate(
        f"[2026-07-21 09:00:00 TP0] {POOL}",
        "[2026-07-21 09:00:00 TP0] Decode batch. #running-req: 1",
        f"[2026-07-21 09:00:00 TP0] {DRAFT}",
        f"[2026-07-21 09:00:09 TP0] {SIZED}",
    )
    assert state(out[0]) == ("va_upper_bound", "post-capture-after-pool", 4)
    assert state(out[2])[0] == "allocated"
    assert out[1] == b"[2026-07-21 09:00:00 TP0] Decode batch. #running-req: 1"


def test_without_evidence_the_claim_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The look-ahead is bounded: past it, a pool keeps the state its line claimed."""
    monkeypatch.setattr(engine, "LOOKAHEAD_LINES", 3)
    out = migrate(f"[2026-07-21 09:00:00 TP0] {POOL}", *["filler"] * 4, f"[2026-07-21 09:00:09 TP0] {SIZED}")
    assert state(out[0]) == ("allocated", "look-ahead-exhausted", None)
    assert out[1:5] == [b"filler"] * 4


def test_the_look_ahead_counts_the_lines_only_events_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "LOOKAHEAD_LINES", 3)
    text = "".join(f"{line}\n" for line in (f"[2026-07-21 09:00:00 TP0] {POOL}", *["filler"] * 4, SIZED))
    out = io.BytesIO()
    Migrator(CHAIN, MigrateOptions(only_events=True)).migrate("ctx.log", io.BytesIO(text.encode()), out)
    first, sized = (orjson.loads(line) for line in out.getvalue().splitlines())
    assert state(first) == ("allocated", "look-ahead-exhausted", None)
    assert sized["event"] == "kv_pool.post_capture_sized"


def test_todays_wording_is_read_not_inferred() -> None:
    out = migrate(
        "[2026-09-01 00:00:00 TP0] KvVmmArena[9_0] ready: device=0 reserved_va=20.0 GiB granularity=2048 KiB",
        "[2026-09-01 00:00:00 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1000, K size: 9.00 GB, "
        "V size: 9.00 GB",
        f"[2026-09-01 00:00:00 TP0] {DRAFT}",
    )
    assert state(out[1]) == ("va_upper_bound", None, None)
    assert state(out[2]) == ("allocated", None, None)


def test_dtype_line_fills_older_allocation_lines_per_rank_and_run() -> None:
    out = migrate(
        "[2025-01-01 00:00:00 TP0] Using KV cache dtype: torch.float8_e5m2",
        "[2025-01-01 00:00:01 TP0] KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB.",
        "[2025-01-01 00:00:01 TP1] KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB.",
        "[2025-01-01 00:00:02] server_args=ServerArgs()",
        "[2025-01-01 00:00:03 TP0] KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB.",
    )
    assert out[1]["dtype"] == "torch.float8_e5m2"  # type: ignore[index]
    assert out[1]["migrated"]["inferred"]["dtype"] == {  # type: ignore[index]
        "rule": "kv-cache-dtype-line",
        "evidence": "Using KV cache dtype: torch.float8_e5m2",
        "evidence_line": 1,
    }
    assert out[2]["dtype"] is None  # type: ignore[index]
    assert out[4]["dtype"] is None  # type: ignore[index]


#: the prefixes a rank's lines carry (sglang-log-formats.md, "Line prefix"): none (a pasted bare message),
#: a timestamp alone (one process), one tag, and several tags, printed in an order other than sorted
RANK_PREFIXES = [
    "",
    "[2025-01-01 00:00:00] ",
    "[2025-01-01 00:00:00 TP0] ",
    "[2025-01-01 00:00:00 PP1 TP10] ",
    "[2025-01-01 00:00:00 TP3 EP3] ",
    "[2025-01-01 00:00:00 DP0 TP0 EP0] ",
    "[2025-01-01 00:00:00 ATTN_CP5 TP5] ",
]
OTHER_RANK = "[2025-01-01 00:00:00 TP7] "


@pytest.mark.parametrize("prefix", RANK_PREFIXES)
def test_a_dtype_line_fills_the_pool_printed_with_its_prefix_and_not_another_ranks(prefix: str) -> None:
    """The dtype line is no event: the pool it belongs to is found by the rank its prefix names, however written."""
    older = "KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB."
    out = migrate(f"{prefix}Using KV cache dtype: torch.float8_e5m2", f"{OTHER_RANK}{older}", f"{prefix}{older}")
    assert [event["dtype"] for event in out[1:]] == [None, "torch.float8_e5m2"]  # type: ignore[index]


@pytest.mark.parametrize("prefix", RANK_PREFIXES)
def test_a_post_capture_note_tells_the_pool_printed_with_its_prefix_and_not_another_ranks(prefix: str) -> None:
    """A post-capture warning is no event either: it is evidence for its own rank's waiting pool only."""
    note = "Post-capture KV sizing: max_running_requests 4096 -> 2048"
    out = migrate(f"{prefix}{POOL}", f"{OTHER_RANK}{POOL}", f"{prefix}{note}")
    assert state(out[0]) == ("va_upper_bound", "post-capture-after-pool", 3)
    assert state(out[1]) == ("allocated", "v1-claims-allocated", None)


def test_json_events_of_an_older_version_join_the_context() -> None:
    arena = {
        "event": "kv_arena.ready",
        "schema_version": 1,
        "timestamp": "2026-07-21T09:02:11Z",
        "level": "info",
        "ranks": {"tp": 0},
        "arena_id": "0",
        "device": 0,
        "reserved_bytes": 1 << 30,
        "granularity_bytes": 4096,
    }
    out = migrate(orjson.dumps(arena).decode(), orjson.dumps(POOL_V1).decode())
    assert out[0]["reserved_va_bytes"] == 1 << 30  # type: ignore[index]
    assert state(out[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert out[1]["migrated"]["source_format"] == "kvlog-json/v1"  # type: ignore[index]


# -- every post-capture wording, and the committed bytes it states (sglang 0.5.17 on) -------------------------

COMMITTED = (
    "Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 812345, "
    "KV size: 49.58 GB, avail mem=3.21 GB"
)
DRAFT_COMMITTED = (
    "Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: 4096, KV size: 0.25 GB"
)
TOKENS = "Post-capture KV sizing: full_layer_tokens=812345, swa_layer_tokens=0"
GIB = 1 << 30


def test_0_5_17_without_its_arena_line_the_post_capture_lines_tell_the_bound_and_the_committed_bytes() -> None:
    """The seed's lie: 208 GiB of address space printed as allocated, the arena line filtered out."""
    pool = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1703936, K size: 104.00 GB, V size: 104.00 GB"
    out = migrate(
        f"[2026-08-10 10:00:05 TP0] {pool}",
        "[2026-08-10 10:00:05 TP0] Memory pool end. avail mem=20.00 GB",
        f"[2026-08-10 10:00:30 TP0] {TOKENS}",
        f"[2026-08-10 10:00:30 TP0] {COMMITTED}",
    )
    assert state(out[0]) == ("va_upper_bound", "post-capture-after-pool", 3)
    assert committed(out[0]) == (round(49.58 * GIB), "post-capture-committed", 4)
    assert out[0]["migrated"]["uncertainty_bytes"]["committed_bytes"] == 5368710  # type: ignore[index]
    assert out[2] == f"[2026-08-10 10:00:30 TP0] {TOKENS}".encode()  # recognised, kept as it was
    sized = out[3]
    assert isinstance(sized, dict) and sized["event"] == "kv_pool.post_capture_sized"
    assert (sized["committed_bytes"], sized["free_bytes"], sized["label"]) == (
        round(49.58 * GIB),
        round(3.21 * GIB),
        None,
    )


@pytest.mark.parametrize(
    "note",
    [
        TOKENS,
        "Post-capture KV sizing: max_running_requests 4096 -> 2048",
        "Post-capture KV sizing: KV-canary per-forward workspace 0.12 GB",
        "Post-capture KV sizing: decode CUDA graph max_bs=256 < max_running_requests=4096; "
        "reserving activation headroom",
    ],
)
def test_any_post_capture_wording_is_evidence(note: str) -> None:
    out = migrate(f"[2026-08-10 10:00:05 TP2] {POOL}", f"[2026-08-10 10:00:30 TP2] {note}")
    assert state(out[0]) == ("va_upper_bound", "post-capture-after-pool", 2)
    assert committed(out[0]) == (None, None, None)  # no line stated it: unknown, not guessed


def test_an_arena_pool_is_held_for_its_committed_bytes_and_a_draft_line_fills_the_draft() -> None:
    """0.5.22 on: the draft pool is a VA bound too, and its own post-capture line says what it commits."""
    draft = "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 4096, K size: 0.50 GB, V size: 0.50 GB"
    out = migrate(
        f"[2026-10-20 10:00:00 TP0] {ARENA}",
        f"[2026-10-20 10:00:01 TP0] {POOL}",
        f"[2026-10-20 10:00:02 TP0] {draft}",
        f"[2026-10-20 10:00:30 TP0] {COMMITTED}",
        f"[2026-10-20 10:00:30 TP0] {DRAFT_COMMITTED}",
    )
    assert state(out[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert committed(out[1]) == (round(49.58 * GIB), "post-capture-committed", 4)
    assert committed(out[2]) == (round(0.25 * GIB), "post-capture-committed", 5)
    assert out[4]["label"] == "draft" and out[4]["free_bytes"] is None  # type: ignore[index]


def test_a_draft_line_without_the_targets_fills_nothing() -> None:
    out = migrate(
        f"[2026-10-20 10:00:00 TP0] {ARENA}",
        f"[2026-10-20 10:00:01 TP0] {POOL}",
        f"[2026-10-20 10:00:30 TP0] {DRAFT_COMMITTED}",
    )
    assert committed(out[1]) == (None, None, None)


def test_a_hybrid_groups_committed_bytes_go_to_its_summary() -> None:
    full = "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 800000, K size: 4.00 GB, V size: 4.00 GB"
    swa = "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 200000, K size: 1.00 GB, V size: 1.00 GB"
    summary = "SWAKVPool mem usage: 10.00 GB, swa size: 200000, full size: 800000"
    out = migrate(
        *(f"[2026-08-10 10:00:0{i} TP0] {line}" for i, line in enumerate([full, swa, summary, TOKENS, COMMITTED]))
    )
    assert [state(e)[:2] for e in out[:3]] == [("va_upper_bound", "post-capture-after-pool")] * 3
    assert [committed(e)[0] for e in out[:3]] == [None, None, round(49.58 * GIB)]


def test_the_unified_pool_before_0_5_22_claims_allocated_and_context_corrects_it() -> None:
    unified = "[unified-memory-pool] UnifiedKVPool allocated: total_bytes=60.00 GB (=64424509440 B), 3 sub-pool(s)"
    out = migrate(f"[2026-08-10 10:00:00 TP0] {unified}", f"[2026-08-10 10:00:30 TP0] {COMMITTED}")
    assert state(out[0]) == ("va_upper_bound", "post-capture-after-pool", 2)
    assert out[0]["total_bytes"] == 64424509440 and "total_bytes" not in out[0]["migrated"].get("uncertainty_bytes", {})  # type: ignore[index]
    assert committed(out[0])[0] == round(49.58 * GIB)
    alone = migrate(f"[2026-07-12 10:00:00 TP0] {unified}")[0]
    assert state(alone) == ("allocated", "line-claims-allocated", None)


def test_the_unified_pool_of_0_5_22_says_its_state() -> None:
    line = (
        "[unified-memory-pool] UnifiedKVPool reserved VA upper bound: "
        "total_bytes=60.00 GB (=64424509440 B), 3 sub-pool(s)"
    )
    event = migrate(f"[2026-10-20 10:00:00 TP0] {line}")[0]
    assert state(event) == ("va_upper_bound", None, None)
    assert (event["total_bytes"], event["sub_pools"]) == (64424509440, 3)  # type: ignore[index]


# -- the end of start-up: sglang prints the scheduler's limits line after every post-capture line --------------

#: 0.4.2 to 0.4.6.post5 (every rank until 0.4.6.post3); 0.4.7 on adds the free memory (TP rank 0 only)
LIMITS_0_4 = (
    "max_total_num_tokens=1017117, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=4097, context_len=131072"
)
LIMITS = f"{LIMITS_0_4}, available_gpu_mem=8.54 GB"


def test_0_4_3_every_rank_ends_its_own_start_up() -> None:
    """sglang 0.4.3.post2 prints the limits line on every rank, after its pool: nothing waits past it."""
    lines = (
        "[2025-02-01 09:10:00] server_args=ServerArgs(tp_size=2)",
        "[2025-02-01 09:10:11 TP0] KV Cache is allocated. K size: 31.04 GB, V size: 31.04 GB.",
        "[2025-02-01 09:10:11 TP1] KV Cache is allocated. K size: 31.04 GB, V size: 31.04 GB.",
        "[2025-02-01 09:10:12 TP1] Memory pool end. avail mem=8.37 GB",
        f"[2025-02-01 09:10:20 TP0] {LIMITS_0_4}",
        f"[2025-02-01 09:10:20 TP1] {LIMITS_0_4}",
    )
    events, written = live(*lines)
    assert written == len(lines)
    assert [(e["event"], e["ranks"]) for e in events[:3]] == [
        ("kv_pool.allocation", {"tp": 0}),
        ("kv_pool.allocation", {"tp": 1}),
        ("kv_memory.pool_end", {"tp": 1}),
    ]
    assert [state(e) for e in events[:2]] == [("allocated", "v1-claims-allocated", None)] * 2
    assert events[:2] == migrate(*lines)[1:3]  # what kvlog migrate writes, not sooner and different


def test_0_5_15_the_limits_line_of_tp0_releases_tp0_only() -> None:
    """From 0.4.6.post4 only TP rank 0 prints it: another rank's pool waits as before (its run's end, or the hold)."""
    pool = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 9.00 GB, V size: 9.00 GB"
    lines = (
        f"[2026-06-01 10:00:00 TP1] {pool}",
        f"[2026-06-01 10:00:00 TP0] {pool}",
        f"[2026-06-01 10:00:30 TP0] {LIMITS}",
    )
    events, written = live(*lines)
    assert (events, written) == ([], 0)  # TP1's pool, first in the file, still waits
    events, written = live(*lines[1:])
    assert written == 2
    assert state(events[0]) == ("allocated", "v1-claims-allocated", None)
    assert events[1]["event"] == "scheduler.limits"


def test_a_pool_after_the_end_of_start_up_is_written_at_once() -> None:
    events, written = live(f"[2026-06-01 10:00:30 TP0] {LIMITS}", f"[2026-06-01 10:00:31 TP0] {POOL}")
    assert written == 2
    assert state(events[1]) == ("allocated", "v1-claims-allocated", None)


def test_a_restart_waits_again() -> None:
    lines = (
        f"[2026-06-01 10:00:30 TP0] {LIMITS}",
        "[2026-06-01 11:00:00 TP0] Load weight begin. avail mem=70.00 GB",
        f"[2026-06-01 11:00:01 TP0] {POOL}",
        f"[2026-06-01 11:00:09 TP0] {SIZED}",
    )
    assert live(*lines[:3])[1] == 2
    assert state(migrate(*lines)[2]) == ("va_upper_bound", "post-capture-after-pool", 4)


def test_0_5_16_the_post_capture_line_before_the_limits_line_still_tells_the_bound() -> None:
    """0.5.16: Scheduler.init_model_worker resizes after capture, then prints the limits line."""
    lines = (
        f"[2026-07-26 10:00:05 TP0] {POOL}",
        "[2026-07-26 10:00:05 TP0] Memory pool end. avail mem=20.00 GB",
        "[2026-07-26 10:00:30 TP0] Post-capture KV sizing: max_running_requests 4096 -> 2048",
        f"[2026-07-26 10:00:30 TP0] {SIZED}",
        f"[2026-07-26 10:00:31 TP0] {LIMITS}",
    )
    out = migrate(*lines)
    assert state(out[0]) == ("va_upper_bound", "post-capture-after-pool", 3)
    assert committed(out[0]) == (None, None, None)
    assert live(*lines)[1] == len(lines)


def test_0_5_17_the_committed_line_before_the_limits_line_still_gives_the_committed_bytes() -> None:
    lines = (
        f"[2026-08-10 10:00:00 TP0] {ARENA}",
        f"[2026-08-10 10:00:01 TP0] {POOL}",
        f"[2026-08-10 10:00:30 TP0] {TOKENS}",
        f"[2026-08-10 10:00:30 TP0] {COMMITTED}",
        f"[2026-08-10 10:00:31 TP0] {LIMITS}",
    )
    out = migrate(*lines)
    assert state(out[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert committed(out[1]) == (round(49.58 * GIB), "post-capture-committed", 4)


def test_committed_bytes_no_line_stated_before_the_end_of_start_up_stay_unknown() -> None:
    """A VA pool whose post-capture lines are missing (a filtered log): the limits line ends the wait, and says so."""
    lines = (
        f"[2026-08-10 10:00:00 TP0] {ARENA}",
        f"[2026-08-10 10:00:01 TP0] {POOL}",
        f"[2026-08-10 10:00:31 TP0] {LIMITS}",
    )
    events, written = live(*lines)
    assert written == 3
    assert state(events[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert committed(events[1]) == (None, "no-post-capture-before-start-up-end", 3)
    assert events[1] == migrate(*lines)[1]


# -- the server's ready line: printed once every local scheduler is ready, after every rank's post-capture lines ----

READY = "The server is fired up and ready to roll!"
#: sglang 0.5.13 to 0.5.15 on four GPUs (no post-capture sizing): every rank prints its pool, only TP rank 0
#: the limits line
FOUR_RANKS = (
    "[2026-06-20 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-32B', tp_size=4)",
    *(f"[2026-06-20 10:00:31 TP{rank}] {POOL}" for rank in (1, 0, 3, 2)),
    f"[2026-06-20 10:00:40 TP0] {LIMITS}",
)


def test_the_ready_line_ends_the_start_up_of_every_rank() -> None:
    """Before it, TP1's pool (the first in the file) waits, holding back all behind it; at it, every rank is written."""
    assert live(*FOUR_RANKS) == ([], 1)
    lines = (*FOUR_RANKS, f"[2026-06-20 10:01:02] {READY}")
    events, written = live(*lines)
    assert written == len(lines)
    assert [e["ranks"] for e in events[:4]] == [{"tp": 1}, {"tp": 0}, {"tp": 3}, {"tp": 2}]
    assert [state(e) for e in events[:4]] == [("allocated", "v1-claims-allocated", None)] * 4
    assert events == [e for e in migrate(*lines) if isinstance(e, dict)]  # what kvlog migrate writes


def test_without_the_ready_line_the_other_ranks_wait_to_the_end_of_their_run() -> None:
    """Warmup failed (or the log was cut): TP1 to TP3's pools wait for the file's end or the next run, as before."""
    out = migrate(*FOUR_RANKS)
    assert [state(e) for e in out[1:5]] == [("allocated", "v1-claims-allocated", None)] * 4
    lines = (*FOUR_RANKS, "[2026-06-20 11:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-32B', tp_size=4)")
    events, written = live(*lines)
    assert written == len(lines)
    assert events[:5] == out[1:]


def test_0_5_16_post_capture_lines_of_every_rank_before_the_ready_line_keep_their_states() -> None:
    """Every rank's post-capture line comes before the ready line: each pool is a VA bound, as without it."""
    lines = (
        *(f"[2026-07-26 10:00:05 TP{rank}] {POOL}" for rank in range(4)),
        *(f"[2026-07-26 10:00:30 TP{rank}] {SIZED}" for rank in (2, 0, 3, 1)),
        f"[2026-07-26 10:00:31 TP0] {LIMITS}",
        f"[2026-07-26 10:00:50] {READY}",
    )
    out = migrate(*lines)
    sized_line = {0: 6, 1: 8, 2: 5, 3: 7}
    for rank in range(4):
        assert state(out[rank]) == ("va_upper_bound", "post-capture-after-pool", sized_line[rank])
        assert committed(out[rank]) == (None, None, None)  # 0.5.16 states no committed bytes
    assert live(*lines)[1] == len(lines)


def test_0_5_17_committed_lines_before_the_ready_line_give_every_rank_its_committed_bytes() -> None:
    lines = (
        *(f"[2026-08-10 10:00:00 TP{rank}] {ARENA}" for rank in range(2)),
        *(f"[2026-08-10 10:00:01 TP{rank}] {POOL}" for rank in range(2)),
        *(f"[2026-08-10 10:00:30 TP{rank}] {COMMITTED}" for rank in range(2)),
        f"[2026-08-10 10:00:31 TP0] {LIMITS}",
        f"[2026-08-10 10:00:50] {READY}",
    )
    out = migrate(*lines)
    for rank in range(2):
        assert state(out[2 + rank]) == ("va_upper_bound", "arena-before-pool", 1 + rank)
        assert committed(out[2 + rank]) == (round(49.58 * GIB), "post-capture-committed", 5 + rank)


def test_committed_bytes_no_line_stated_before_the_ready_line_stay_unknown() -> None:
    """TP1's committed line is missing (a filtered log): the ready line ends its wait, and the rule says so."""
    lines = (
        *(f"[2026-08-10 10:00:00 TP{rank}] {ARENA}" for rank in range(2)),
        *(f"[2026-08-10 10:00:01 TP{rank}] {POOL}" for rank in range(2)),
        f"[2026-08-10 10:00:30 TP0] {COMMITTED}",
        f"[2026-08-10 10:00:31 TP0] {LIMITS}",
        f"[2026-08-10 10:00:50] {READY}",
    )
    events, written = live(*lines)
    assert written == len(lines)
    tp1 = events[3]
    assert (tp1["ranks"], state(tp1)) == ({"tp": 1}, ("va_upper_bound", "arena-before-pool", 2))
    assert committed(tp1) == (None, "no-post-capture-before-start-up-end", 7)
    evidence = tp1["migrated"]["inferred"]["committed_bytes"]["evidence"]
    assert "before the server's ready line (The server is fired up and ready to roll!)" in evidence
    assert committed(events[2])[1:] == ("post-capture-committed", 5)
    assert tp1 == migrate(*lines)[3]


def test_a_rank_whose_wait_the_limits_line_ended_keeps_that_line_as_evidence_at_the_ready_line() -> None:
    """TP1's pool, first in the file, holds TP0's back past TP0's limits line: the ready line must not re-tell TP0's."""
    lines = (
        *(f"[2026-08-10 10:00:00 TP{rank}] {ARENA}" for rank in (1, 0)),
        *(f"[2026-08-10 10:00:01 TP{rank}] {POOL}" for rank in (1, 0)),
        f"[2026-08-10 10:00:31 TP0] {LIMITS}",
        f"[2026-08-10 10:00:50] {READY}",
    )
    events, written = live(*lines)
    assert written == len(lines)
    tp1, tp0 = events[2:4]
    assert [committed(tp1), committed(tp0)] == [(None, "no-post-capture-before-start-up-end", line) for line in (6, 5)]
    assert (
        "before the scheduler's max_total_num_tokens line" in tp0["migrated"]["inferred"]["committed_bytes"]["evidence"]
    )
    assert [tp1, tp0] == migrate(*lines)[2:4]


def test_the_ready_line_ends_the_start_up_of_a_rank_that_began_loading_its_weights() -> None:
    """A rank's run that started at its ``Load weight begin`` line is ended by the ready line like any other."""
    lines = (
        "[2026-06-01 10:00:00 TP0] Load weight begin. avail mem=70.00 GB",
        f"[2026-06-01 10:01:02] {READY}",
        f"[2026-06-01 10:01:03 TP0] {POOL}",
    )
    events, written = live(*lines)
    assert written == len(lines)
    assert state(events[-1]) == ("allocated", "v1-claims-allocated", None)
    later = migrate(*lines, f"[2026-06-01 10:01:04 TP0] {SIZED}")
    assert state(later[2]) == ("allocated", "v1-claims-allocated", None)  # not a bound told by a line after start-up


def test_a_restart_after_the_ready_line_waits_again() -> None:
    lines = (
        *FOUR_RANKS,
        f"[2026-06-20 10:01:02] {READY}",
        "[2026-07-26 10:00:00] server_args=ServerArgs(tp_size=2)",
        f"[2026-07-26 10:00:05 TP1] {POOL}",
    )
    assert live(*lines)[1] == len(lines) - 1
    assert state(migrate(*lines, f"[2026-07-26 10:00:30 TP1] {SIZED}")[-2]) == (
        "va_upper_bound",
        "post-capture-after-pool",
        len(lines) + 1,
    )


@pytest.mark.parametrize(
    "ready",
    [
        f"[2026-06-20 10:01:02] {READY}",  # 0.3.4 on: the date, the main process's lines carry no rank
        f"[2026-06-20 10:01:02.123] {READY}",  # a fraction of a second (sglang's optional milliseconds)
        f"[2026-06-20 10:01:02] INFO http_server.py:1087: {READY}",  # a custom logging format
        f"[10:01:02] {READY}",  # 0.2.14 to 0.3.3.post1: the time of day only
        READY,  # up to 0.2.13: bare messages
    ],
)
def test_the_ready_line_with_the_prefix_of_each_era(ready: str) -> None:
    lines = (f"[2026-06-20 10:00:31 TP1] {POOL}", f"[2026-06-20 10:00:31 TP0] {POOL}", ready)
    events, written = live(*lines)
    assert (len(events), written) == (2, 3)
    out = io.BytesIO()
    report = Migrator(CHAIN, MigrateOptions()).migrate("ready.log", io.BytesIO(f"{ready}\n".encode()), out)
    assert out.getvalue() == f"{ready}\n".encode()  # recognised, never rewritten
    assert (report.events, dict(report.companions), report.unparsed_memory_lines) == (0, {"start_up_end": 1}, 0)
