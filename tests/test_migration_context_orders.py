"""Per-rank context over the pool orders real sglang logs print: hybrid (SWA) groups, draft models, labelled
sub-pools after a group, and each signal of today's wording on its own.

Lines are those of the golden corpus (``tests/corpus/``) and the wordings of ``migrations/sglang-text/``:
``postcapture_before_fix_2026_07.log`` (0.5.16, sizes printed before capture), ``hybrid_swa_2026.log``
(labelled ``SWA``/``Full`` sub-pools and their ``SWAKVPool`` summary), ``postcapture_after_fix_2026_09.log``
(today's wording: ``reserved_va=``, ``VA upper bound``).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from migration_helpers import committed, live, migrate, state

from kvlog.migration import engine

GIB = 1 << 30
# 0.5.16 / 0.5.17, before the wording fix (postcapture_before_fix_2026_07.log, hybrid_swa_2026.log)
ARENA_0 = "[2026-07-22 14:01:02 TP0] KvVmmArena[0] ready: device=0 reserved=9.2 GiB granularity=2048 KiB"
ARENA_1 = "[2026-07-22 14:01:02 TP0] KvVmmArena[1] ready: device=0 reserved=11.2 GiB granularity=2048 KiB"
SWA = (
    "[2026-07-24 08:00:31 TP0] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2122240, "
    "K size: 2.03 GB, V size: 2.03 GB"
)
FULL = (
    "[2026-07-24 08:00:31 TP0] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2652800, "
    "K size: 2.53 GB, V size: 2.53 GB"
)
SUMMARY = "[2026-07-24 08:00:31 TP0] SWAKVPool mem usage: 9.12 GB, swa size: 2122240, full size: 2652800"
DRAFT = (
    "[2026-07-24 08:00:32 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2652800, "
    "K size: 0.25 GB, V size: 0.25 GB"
)
POOL_END = "[2026-07-24 08:00:32 TP0] Memory pool end. avail mem=118.40 GB"
SIZED = "[2026-07-24 08:01:40 TP0] Post-capture KV sizing: max_total_num_tokens=2097152, free memory=96.33 GB"
COMMITTED = (
    "[2026-08-10 10:00:30 TP0] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, "
    "#tokens: 812345, KV size: 49.58 GB, avail mem=3.21 GB"
)
# today's wording (postcapture_after_fix_2026_09.log)
ARENA_VA = "[2026-09-02 08:04:40 TP0] KvVmmArena[48211_0] ready: device=0 reserved_va=52.4 GiB granularity=2048 KiB"
POOL_VA = (
    "[2026-09-02 08:04:40 TP0] KV Cache VA upper bound. dtype: torch.float8_e4m3fn, #tokens: 1523712, KV size: 50.87 GB"
)
SUMMARY_VA = "[2026-09-03 12:01:02 TP0] SWAKVPool VA upper bound: 18.22 GB, swa size: 1061120, full size: 1326400"
DRAFT_TODAY = (
    "[2026-09-02 08:04:41 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1523712, KV size: 0.83 GB"
)
UNIFIED_VA = (
    "[2026-10-20 10:00:00 TP0] [unified-memory-pool] UnifiedKVPool reserved VA upper bound: "
    "total_bytes=60.00 GB (=64424509440 B), 3 sub-pool(s)"
)
READ = ("allocated", None, None)  # the state the line says, not inferred
CLAIMED = ("allocated", "v1-claims-allocated", None)


def va_after(line: int) -> tuple[str, str, int]:
    """A VA upper bound told by the post-capture line on ``line``."""
    return ("va_upper_bound", "post-capture-after-pool", line)


# -- hybrid groups, draft models, and the labelled sub-pools printed after a group ------------------------


def test_a_post_capture_line_tells_the_hybrid_group_and_not_the_draft_after_it() -> None:
    """gpt-oss with an EAGLE3 draft, 0.5.16 (the corpus's fourth run): the group is SWA, Full and their summary."""
    out = migrate(SWA, FULL, SUMMARY, DRAFT, POOL_END, SIZED)
    assert [state(e) for e in out[:3]] == [va_after(6)] * 3
    assert state(out[3]) == CLAIMED


def test_labelled_pools_after_the_groups_first_unlabelled_pool_are_not_in_the_group() -> None:
    """A draft model's own labelled pools come after its plain pool: the target's group ended at that pool."""
    out = migrate(SWA, FULL, SUMMARY, DRAFT, SWA.replace("2122240", "4096"), FULL.replace("2652800", "4096"), SIZED)
    assert [state(e) for e in out[:3]] == [va_after(7)] * 3
    assert [state(e) for e in out[3:6]] == [CLAIMED] * 3


def test_a_draft_models_hybrid_pools_after_the_targets_arenas_are_used_up_stay_allocated() -> None:
    """Two arenas for the target's two sub-pools; the draft's sub-pools and summary that follow are real memory."""
    out = migrate(ARENA_0, ARENA_1, SWA, FULL, SUMMARY, DRAFT, SWA, FULL, SUMMARY)
    assert [state(e) for e in out[2:4]] == [
        ("va_upper_bound", "arena-before-pool", 1),
        ("va_upper_bound", "arena-before-pool", 2),
    ]
    assert state(out[4]) == ("va_upper_bound", "sub-pools-are-va-bound", 3)
    assert [state(e) for e in out[5:]] == [CLAIMED] * 4


def test_a_summary_after_an_arena_but_without_its_sub_pools_cites_the_arena() -> None:
    """A log filtered to the summaries: the arena line still tells that the group lives in address space."""
    out = migrate(ARENA_0, ARENA_1, SUMMARY)
    assert state(out[2]) == ("va_upper_bound", "sub-pools-are-va-bound", 1)
    evidence = out[2]["migrated"]["inferred"]["allocation_state"]["evidence"]  # type: ignore[index]
    assert evidence == f"KvVmmArena[0] ready, {round(9.2 * GIB)} bytes of address space reserved"


def test_a_waiting_summary_is_held_back_until_the_post_capture_line_tells_it() -> None:
    """The summary alone (its sub-pools filtered out) waits: written sooner, it would claim allocated."""
    assert live(SUMMARY, POOL_END) == ([], 0)
    out = migrate(SUMMARY, POOL_END, SIZED)
    assert state(out[0]) == va_after(3)
    events, written = live(SUMMARY, POOL_END, SIZED)
    assert written == 3
    assert events[0] == out[0]


def test_a_summary_no_line_tells_more_keeps_its_claim_at_the_end_of_its_run() -> None:
    out = migrate(SUMMARY, POOL_END)
    assert state(out[0]) == ("allocated", "v1-claims-allocated", None)


def test_labelled_sub_pools_without_their_summary_get_no_committed_figure() -> None:
    """0.5.17's committed KV size is the group's total: no single sub-pool's, so none is given it."""
    out = migrate(ARENA_0, ARENA_1, SWA, FULL, COMMITTED)
    assert [state(e)[:2] for e in out[2:4]] == [("va_upper_bound", "arena-before-pool")] * 2
    assert [committed(e) for e in out[2:4]] == [(None, None, None)] * 2


SWA_VA = (
    "[2026-09-03 12:01:02 TP0] SWA KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1061120, "
    "K size: 4.05 GB, V size: 4.05 GB"
)
FULL_VA = (
    "[2026-09-03 12:01:02 TP0] Full KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1326400, "
    "K size: 5.06 GB, V size: 5.06 GB"
)


@pytest.mark.parametrize(
    "group",
    [(ARENA_0, ARENA_1, SWA, FULL, SUMMARY), (ARENA_VA, SWA_VA, FULL_VA, SUMMARY_VA)],
    ids=["0.5.17-arena-lines", "todays-wording"],
)
def test_a_hybrid_groups_committed_figure_goes_to_its_summary_not_to_the_draft_after_it(group: tuple[str, ...]) -> None:
    """The summary's ``committed_bytes`` is absent, not null, until the committed line: it waits all the same.

    Before the fix, a group known to be VA from its arena lines or its wording waited with its sub-pools
    alone, and the committed figure, no single sub-pool's, was dropped.
    """
    out = migrate(*group, DRAFT, COMMITTED)
    summary = len(group) - 1
    assert committed(out[summary]) == (round(49.58 * GIB), "post-capture-committed", len(group) + 2)
    assert out[summary]["migrated"]["uncertainty_bytes"]["committed_bytes"] == 5368710  # type: ignore[index]
    assert [committed(e) for e in (out[summary - 2], out[summary - 1], out[summary + 1])] == [(None, None, None)] * 3


# -- today's wording: each signal alone makes "is allocated" mean allocated -----------------------------


def test_todays_arena_line_alone_makes_is_allocated_read_as_printed() -> None:
    """``reserved_va=``: after the fix, so the draft's ``is allocated`` is not the arena's pool."""
    out = migrate(ARENA_VA, DRAFT_TODAY)
    assert state(out[1]) == READ
    assert "inferred" in out[1]["migrated"]  # type: ignore[index]  # the timestamp's note stays


def test_todays_pool_wording_alone_makes_is_allocated_read_as_printed() -> None:
    """``KV Cache VA upper bound.`` with its arena line filtered out."""
    out = migrate(POOL_VA, DRAFT_TODAY)
    assert state(out[0]) == ("va_upper_bound", None, None)
    assert state(out[1]) == READ


def test_todays_summary_wording_alone_makes_is_allocated_read_as_printed() -> None:
    """``SWAKVPool VA upper bound:`` with its arena and sub-pool lines filtered out."""
    out = migrate(SUMMARY_VA, DRAFT_TODAY)
    assert state(out[0]) == ("va_upper_bound", None, None)
    assert state(out[1]) == READ


def test_todays_unified_pool_wording_alone_makes_is_allocated_read_as_printed() -> None:
    """0.5.22's ``UnifiedKVPool reserved VA upper bound:`` (an event of one version), its arena line filtered out."""
    out = migrate(UNIFIED_VA, DRAFT_TODAY, COMMITTED)
    assert state(out[0]) == ("va_upper_bound", None, None)
    assert committed(out[0])[1:] == ("post-capture-committed", 3)
    assert state(out[1]) == READ  # a draft, not a bound the post-capture line tells


def test_in_todays_wording_a_summary_that_says_mem_usage_is_read_as_printed() -> None:
    """A draft's hybrid summary after today's VA pool: ``mem usage`` is memory."""
    out = migrate(POOL_VA, SUMMARY)
    assert state(out[1]) == READ


def json_line(event: dict[str, Any]) -> str:
    return orjson.dumps(event).decode()


POOL_V2 = {
    "event": "kv_pool.allocation",
    "schema_version": 2,
    "timestamp": "2026-07-24T08:00:30Z",
    "level": "info",
    "ranks": {"tp": 0},
    "allocation_state": "allocated",
    "layout": "mha",
    "label": None,
    "dtype": "torch.bfloat16",
    "num_tokens": 1,
    "k_bytes": 1,
    "v_bytes": 1,
    "pool": None,
    "committed_bytes": None,
}


@pytest.mark.parametrize("event", [POOL_V2, {**POOL_V2, "event": "kv_pool.swa_summary"}], ids=["pool", "summary"])
def test_a_current_event_that_says_allocated_is_no_sign_of_todays_wording(event: dict[str, Any]) -> None:
    """Only a VA upper bound printed as such shows the fixed wording; an allocated pool shows nothing."""
    if event["event"] == "kv_pool.swa_summary":
        event = {k: event[k] for k in ("event", "schema_version", "timestamp", "level", "ranks", "allocation_state")}
        event |= {"total_bytes": 1, "swa_tokens": 1, "full_tokens": 1}
    out = migrate(json_line(event), DRAFT, SIZED)
    assert out[0] == event
    assert state(out[1]) == va_after(3)


def test_a_v1_event_read_in_todays_wording_loses_the_inference_it_came_with() -> None:
    """A JSON v1 pool gains ``allocation_state`` as a v1 claim; after today's arena line, the claim is read."""
    arena = {
        "event": "kv_arena.ready",
        "schema_version": 2,
        "timestamp": "2026-09-02T08:04:40Z",
        "level": "info",
        "ranks": {"tp": 0},
        "pid": 48211,
        "arena_id": "48211_0",
        "device": 0,
        "reserved_va_bytes": GIB,
        "granularity_bytes": 2097152,
        "handle_type": None,
        "backend": None,
    }
    pool = {k: v for k, v in POOL_V2.items() if k not in ("allocation_state", "pool", "committed_bytes")}
    out = migrate(json_line(arena), json_line({**pool, "schema_version": 1}))
    assert state(out[1]) == READ
    assert "inferred" not in out[1]["migrated"]  # type: ignore[index]  # nothing else of it was inferred


def test_a_summary_that_states_its_group_ends_it_for_the_summary_after_it() -> None:
    """A kvlog JSON summary in the log (current, allocated) closes the group of the VA sub-pool before it:
    a later summary (the draft's) is not told by that sub-pool."""
    summary = {k: POOL_V2[k] for k in ("event", "schema_version", "timestamp", "level", "ranks", "allocation_state")}
    summary |= {"event": "kv_pool.swa_summary", "total_bytes": 1, "swa_tokens": 1, "full_tokens": 1}
    out = migrate(ARENA_0, SWA, json_line(summary), SUMMARY)
    assert state(out[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert state(out[3]) == CLAIMED


def test_a_current_va_event_is_not_held_for_its_committed_bytes() -> None:
    """Only events this migration produced are revised: a kvlog JSON VA pool is written as it came, at once."""
    pool = {**POOL_V2, "allocation_state": "va_upper_bound"}
    events, written = live(json_line(pool))
    assert (events, written) == ([pool], 1)
    assert migrate(json_line(pool), COMMITTED)[0] == pool


def test_after_an_arena_a_pool_no_arena_is_left_for_is_allocated_even_if_a_post_capture_line_follows() -> None:
    """0.5.16 with EAGLE3 (the corpus's first run): the arena explains the target's pool; the draft's is memory."""
    out = migrate(ARENA_0, DRAFT, DRAFT.replace("0.25 GB", "0.46 GB"), SIZED)
    assert state(out[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert state(out[2]) == CLAIMED


def test_a_unified_pool_cites_the_first_arena_and_leaves_it_for_the_pools() -> None:
    """0.5.15 to 0.5.21: the unified pool spans the sub-pools' arenas, and claims allocated."""
    unified = (
        "[2026-08-10 10:00:00 TP0] [unified-memory-pool] UnifiedKVPool allocated: "
        "total_bytes=20.40 GB (=21904333209 B), 2 sub-pool(s)"
    )
    out = migrate(ARENA_0, ARENA_1, unified, SWA, FULL)
    assert state(out[2]) == ("va_upper_bound", "arena-before-pool", 1)
    assert [state(e) for e in out[3:]] == [("va_upper_bound", "arena-before-pool", n) for n in (1, 2)]


def test_a_pool_printed_after_a_post_capture_line_is_not_told_by_the_next_one() -> None:
    """0.5.17 prints several post-capture lines: the first already settled which pools were sized before it."""
    tokens = "[2026-08-10 10:00:30 TP0] Post-capture KV sizing: full_layer_tokens=812345, swa_layer_tokens=0"
    out = migrate(DRAFT, tokens, DRAFT, COMMITTED)
    assert state(out[0]) == va_after(2)
    assert state(out[2]) == CLAIMED


def test_the_draft_after_the_group_is_written_at_the_post_capture_line() -> None:
    events, written = live(DRAFT, DRAFT, SIZED)
    assert written == 3
    assert [state(e) for e in events[:2]] == [va_after(3), CLAIMED]


# -- what ends a wait --------------------------------------------------------------------------------


def test_0_5_16s_post_capture_line_ends_the_wait_for_committed_bytes_at_once() -> None:
    """0.5.16 states no committed KV: an arena's pool is written at its post-capture line, not its run's end."""
    lines = (ARENA_0, DRAFT, SIZED)
    events, written = live(*lines)
    assert written == 3
    assert state(events[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert committed(events[1]) == (None, None, None)


def test_committed_bytes_no_line_states_within_the_look_ahead_stay_unknown_and_say_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine, "LOOKAHEAD_LINES", 3)
    out = migrate(ARENA_0, DRAFT, *["filler"] * 4, COMMITTED)
    assert state(out[1]) == ("va_upper_bound", "arena-before-pool", 1)
    assert committed(out[1]) == (None, "look-ahead-exhausted", None)
    evidence = out[1]["migrated"]["inferred"]["committed_bytes"]["evidence"]  # type: ignore[index]
    assert evidence == "no later post-capture line on the same rank and run stated them within 3 lines or 64 MiB"


def test_a_pool_whose_state_no_line_tells_within_the_look_ahead_says_what_its_line_claims(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine, "LOOKAHEAD_LINES", 2)
    out = migrate(DRAFT, *["filler"] * 3)
    evidence = out[0]["migrated"]["inferred"]["allocation_state"]["evidence"]  # type: ignore[index]
    assert (
        evidence
        == "no later line on the same rank and run told more within 2 lines or 64 MiB; the line claims allocated"
    )


def test_a_pool_given_up_on_leaves_the_next_pools_committed_bytes_to_the_next_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A VA pool the look-ahead gave up on is no longer waiting: a later post-capture line is the later pool's."""
    monkeypatch.setattr(engine, "LOOKAHEAD_LINES", 3)
    out = migrate(ARENA_0, DRAFT, *["filler"] * 4, ARENA_1, DRAFT, COMMITTED)
    assert committed(out[1]) == (None, "look-ahead-exhausted", None)
    assert state(out[7]) == ("va_upper_bound", "arena-before-pool", 7)
    assert committed(out[7]) == (round(49.58 * GIB), "post-capture-committed", 9)


def test_a_unified_pool_printed_before_its_labelled_sub_pools_and_summary_is_one_group_with_them() -> None:
    """The group a post-capture line sizes starts with the unified total as it does with a labelled sub-pool.

    Its committed figure is the summary's (the group's total), and the unified line, in the group, is no
    longer waiting: a group cut at the unified line left the summary unsized and sized the unified pool.
    """
    swa_va = SWA.replace("SWA KV Cache is allocated", "SWA KV Cache VA upper bound")
    full_va = FULL.replace("Full KV Cache is allocated", "Full KV Cache VA upper bound")
    out = migrate(UNIFIED_VA, swa_va, full_va, SUMMARY_VA, COMMITTED)
    assert [state(event)[0] for event in out[:4]] == ["va_upper_bound"] * 4
    assert committed(out[3]) == (round(49.58 * GIB), "post-capture-committed", 5)
    assert [committed(event) for event in out[:3]] == [(None, None, None)] * 3
