"""Every wording kvlog reads is read the same behind whatever carried the line: docker, journald, k9s, Ray, a paste.

The property test takes every sample line the format harvest writes (each event and known format of
both servers, with the prefix of its era) and puts it behind any nesting of the wrappers users' logs
come in: the event is the one the bare line makes, ``migrated.steps`` names the wrappers, and the
lines around it that are no memory line come out byte for byte. The examples below it are shapes
pasted in public issue threads.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_formats import EVENTS, KNOWN, RELEASES, TOOL

from kvlog.envelope import WRAPPER_STEP, InferenceRule, Wrapper
from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.text.prefix import SGLANG, VLLM, vllm_process_ranks
from kvlog.text.wrappers import peel

MIGRATOR = Migrator(load_chain(), MigrateOptions())
TEXT = Migrator(load_chain(), MigrateOptions(output_format="text"))

#: (sample line, whether it makes an event): every harvested format's samples, both servers, every era's
#: prefix; a usage line makes one only when asked (``--usage``), and passes as it was here
SAMPLES = [
    (sample.line, kind == "event" and rule.value != "kv_pool.usage")
    for kind, decided in (("event", EVENTS), ("known", KNOWN))
    for fmt, rule in decided
    for sample in TOOL.samples(fmt, rule, RELEASES[fmt.server])
]
#: lines no rule reads, which must pass through byte for byte however they are wrapped
NOT_MEMORY = [
    'INFO:     127.0.0.1:50412 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, #queue-req: 0",
    "(APIServer pid=1) INFO 09-03 00:40:53 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s",
    "(EngineCore_DP0 pid=7) [Stage-1] WARNING 02-23 03:40:36 [fused_moe.py:1087] Using default MoE config.",
]

Wrap = Callable[[str], str]


def _colour_first_word(line: str) -> str:
    """vLLM's way: its process tag in cyan, the rest plain."""
    space = line.find(" ", 1)
    cut = space if space > 0 else len(line)
    return f"\x1b[1;36m{line[:cut]}\x1b[0;0m{line[cut:]}"


#: (kind, wrap, the UTC instant the wrapper prints or None)
WRAPPERS: list[tuple[Wrapper, Wrap, str | None]] = [
    (Wrapper.ANSI, lambda s: f"\x1b[32m{s}\x1b[0m", None),
    (Wrapper.ANSI, _colour_first_word, None),
    (Wrapper.ANSI, lambda s: f"[1;36m{s}[0m", None),  # the ESC bytes lost in a paste
    (Wrapper.ANSI, lambda s: f"{s}\x1b[K", None),
    (Wrapper.HTML, lambda s: f'<font color="#00CDCD">{s}</font>', None),
    (Wrapper.HTML, lambda s: f'<span style="color:#0AA">{s}</span>', None),
    (Wrapper.TIMESTAMP, lambda s: f"2025-09-03T00:40:53.123456789Z {s}", "2025-09-03T00:40:53.123456789Z"),
    (Wrapper.TIMESTAMP, lambda s: f"2024-02-29T23:59:59.1234567Z {s}", "2024-02-29T23:59:59.1234567Z"),
    (Wrapper.TIMESTAMP, lambda s: f"2025-01-02T03:04:05.5+02:00 stdout F {s}", "2025-01-02T01:04:05.5Z"),
    (Wrapper.TIMESTAMP, lambda s: f"[2025-01-02T03:04:05Z] {s}", "2025-01-02T03:04:05Z"),
    (Wrapper.TIMESTAMP, lambda s: f"\x1b_bk;t=1735787045000\x07{s}", "2025-01-02T03:04:05.000Z"),
    (Wrapper.SYSLOG, lambda s: f"Dec 07 10:00:00 gpu-node-1 vllm[123]: {s}", None),
    (Wrapper.SYSLOG, lambda s: f"Dec  7 10:00:00 node python3: {s}", None),
    (Wrapper.SYSLOG, lambda s: f"2025-12-07T10:00:00+0000 node sglang[77]: {s}", "2025-12-07T10:00:00Z"),
    (Wrapper.BORDER, lambda s: f"│ {s} │", None),
    (Wrapper.BORDER, lambda s: f"│{s}", None),
    (Wrapper.QUOTE, lambda s: f"> {s}", None),
    (Wrapper.INDENT, lambda s: f"    {s}", None),
    (Wrapper.INDENT, lambda s: f"\t{s}", None),
    (Wrapper.CARRIAGE_RETURN, lambda s: f"\r{s}", None),
    (Wrapper.RAY_REPEATED, lambda s: f"{s} [repeated 3x across cluster]", None),
    (
        Wrapper.RAY_REPEATED,
        lambda s: (
            f"{s} [repeated 2x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to "
            "disable log deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/"
            "configure-logging.html#log-deduplication for more options.)"
        ),
        None,
    ),
]
#: wrappers that only open a line: their order is the order they are named in
OPENING = {Wrapper.TIMESTAMP, Wrapper.SYSLOG, Wrapper.QUOTE, Wrapper.CARRIAGE_RETURN}


def _wrapped(line: str, wrappers: list[tuple[Wrapper, Wrap, str | None]]) -> str:
    for _, wrap, _ in reversed(wrappers):  # outer first: the innermost is put on first
        line = wrap(line)
    return line


def _opening(kinds: list[Any]) -> list[str]:
    """The wrappers that only open a line, in order, a kind repeated at once named once."""
    opening = [str(kind) for kind in kinds if kind in OPENING]
    return [kind for i, kind in enumerate(opening) if opening[i - 1 : i] != [kind]]


def _migrate(text: str, migrator: Migrator = MIGRATOR) -> tuple[bytes, list[dict[str, Any]]]:
    out, dead = io.BytesIO(), []
    migrator.migrate("sample.log", io.BytesIO(text.encode()), out, dead.append)
    return out.getvalue(), dead


def _events(output: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith(b'{"event"')]


def _wrappers(event: dict[str, Any]) -> list[str]:
    """The wrappers an event's steps say were peeled, outer first."""
    return [step.removeprefix(WRAPPER_STEP) for step in event["migrated"]["steps"] if step.startswith(WRAPPER_STEP)]


def _figures(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in {"timestamp", "migrated"}}


def test_every_format_has_samples() -> None:
    assert len(SAMPLES) > 500 and any(is_event for _, is_event in SAMPLES) and not all(e for _, e in SAMPLES)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SAMPLES),
    st.lists(st.sampled_from(WRAPPERS), min_size=1, max_size=5),
    st.sampled_from(NOT_MEMORY),
)
def test_every_wording_behind_any_wrappers_reads_as_bare(
    sample: tuple[str, bool], wrappers: list[tuple[Wrapper, Wrap, str | None]], other: str
) -> None:
    line, is_event = sample
    bare_out, bare_dead = _migrate(line + "\n")
    around = _wrapped(other, wrappers)
    text = f"{around}\n{_wrapped(line, wrappers)}\n{around}\n"
    out, dead = _migrate(text)
    assert dead == bare_dead == [], text
    lines = out.split(b"\n")
    assert lines[0] == lines[2] == around.encode(), "a line no rule reads comes out as it was"
    bare, events = _events(bare_out), _events(out)
    assert [_figures(e) for e in events] == [_figures(e) for e in bare], text
    if not is_event:
        assert lines[1] == _wrapped(line, wrappers).encode(), "a known line is copied as it was"
        return
    (event,) = events
    named = _wrappers(event)
    assert set(named) == {kind for kind, _, _ in wrappers}, text
    assert _opening(named) == _opening([kind for kind, _, _ in wrappers]), "outer first"
    instants = [instant for _, _, instant in wrappers if instant is not None]
    note = event["migrated"].get("inferred", {}).get("timestamp", {})
    if note.get("rule") == InferenceRule.WRAPPER_TIMESTAMP:
        assert event["timestamp"] == instants[-1], "the innermost wrapper's instant"
        assert bare[0]["migrated"]["inferred"]["timestamp"]["rule"] != InferenceRule.WRAPPER_TIMESTAMP
    else:
        assert event["timestamp"] == bare[0]["timestamp"]
        assert not instants or "timestamp" not in bare[0]["migrated"].get("inferred", {}) or line.startswith("[")


def test_a_line_as_the_server_prints_it_is_no_wrapper() -> None:
    """The dense path: a server's own line is told to have no wrapper before any pattern runs."""
    for line, _ in SAMPLES[:200]:
        if line[:1] in "[(ID":
            assert peel(line) is None, line


# -- real shapes, from public issue threads ---------------------------------------------------------

AVAILABLE = "INFO 09-03 00:40:53 [gpu_worker.py:276] Available KV cache memory: 12.02 GiB"
SGLANG_POOL = "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"


@pytest.mark.parametrize(
    ("line", "ranks", "pid"),
    [
        (f"(VllmWorker TP0 pid=1430) {AVAILABLE}", {"tp": 0}, 1430),
        (f"(VllmWorker PP1_TP0 pid=1430) {AVAILABLE}", {"pp": 1, "tp": 0}, 1430),
        (f"(Worker_TP1_EP1 pid=10821) {AVAILABLE}", {"tp": 1, "ep": 1}, 10821),
        (f"(EngineCore_0 pid=33) {AVAILABLE}", {"dp": 0}, 33),
        (f"(EngineCore_DP1 pid=379) {AVAILABLE}", {"dp": 1}, 379),
        (f"(APIServer pid=3189909) {AVAILABLE}", {}, 3189909),
        (f"(VllmWorkerProcess pid=521) {AVAILABLE}", {}, 521),
        (f"(RayWorkerWrapper pid=20612, ip=10.0.0.1) {AVAILABLE}", {}, 20612),
        (f"(pid=20614) {AVAILABLE}", {}, 20614),
        (f"(EngineCore_0 pid=5) (RayWorkerWrapper pid=6, ip=10.0.0.1) {AVAILABLE}", {"dp": 0}, 6),
        (
            f"(VllmAsyncGenerationWorker pid=222967, ip=10.66.3.172) (EngineCore_DP0 pid=223561) "
            f"(RayWorkerWrapper pid=231741) {AVAILABLE}",
            {"dp": 0},
            231741,
        ),
        (f"(ServeReplica:default:VLLMDeployment pid=7) {AVAILABLE}", {}, 7),
        (f"(EngineCore_DP0 pid=181642) [Stage-0] {AVAILABLE}", {"dp": 0, "stage": 0}, 181642),
        (f"(Worker pid=55635) [Stage-1] {AVAILABLE}", {"stage": 1}, 55635),
        (f"[Stage-2] {AVAILABLE}", {"stage": 2}, None),
    ],
)
def test_vllm_process_tags_of_every_launcher(line: str, ranks: dict[str, int], pid: int | None) -> None:
    split = VLLM.split(line)
    assert (split.ranks, split.pid, split.message) == (ranks, pid, "Available KV cache memory: 12.02 GiB")


def test_process_tags_that_disagree_on_a_rank_are_not_read() -> None:
    assert VLLM.split(f"(Worker_TP0 pid=1) (Worker_TP1 pid=2) {AVAILABLE}").level is None


def test_process_names_without_parallelism_name_no_rank() -> None:
    assert vllm_process_ranks("ApiServer_0") == vllm_process_ranks("VllmWorker-3") == {}
    assert vllm_process_ranks("VllmWorker rank=2") == {"rank": 2}


@pytest.mark.parametrize(
    ("line", "timestamp", "ranks"),
    [
        (f"[2025-10-03 14:38:55 DisaggregationMode.DECODE TP1] {SGLANG_POOL}", "2025-10-03T14:38:55Z", {"tp": 1}),
        (f"[2025-10-03 14:38:55 DP2 TP2 EP2] {SGLANG_POOL}", "2025-10-03T14:38:55Z", {"dp": 2, "tp": 2, "ep": 2}),
        (f"[2025-10-03 14:38:55 PP0 TP1] {SGLANG_POOL}", "2025-10-03T14:38:55Z", {"pp": 0, "tp": 1}),
        (f"[TP0] {SGLANG_POOL}", None, {"tp": 0}),
        (f"[DP0 TP3] {SGLANG_POOL}", None, {"dp": 0, "tp": 3}),
    ],
)
def test_sglang_rank_tags_of_every_release(line: str, timestamp: str | None, ranks: dict[str, int]) -> None:
    split = SGLANG.split(line)
    assert (split.timestamp, split.ranks, split.message) == (timestamp, ranks, SGLANG_POOL)


def test_docker_stamp_before_a_rank_line_is_not_read_as_a_host_and_a_program() -> None:
    # ``Rank 0: `` has the shape of syslog's ``host program: `` but a program's name starts with a letter
    line = "Rank 3: max_total_num_token=812345, max_prefill_num_token=16384, context_len=4096, model_mode=[]"
    out, dead = _migrate(f"2025-09-03T00:40:53.123456789Z {line}\n")
    assert dead == []
    (event,) = _events(out)
    assert (event["event"], event["max_total_num_tokens"]) == ("scheduler.limits", 812345)
    assert _wrappers(event) == ["timestamp"]


@pytest.mark.parametrize(
    ("line", "kinds"),
    [
        (f"\x1b[1;36m(VllmWorker TP0 pid=1430)\x1b[0;0m {AVAILABLE}", ["ansi"]),
        (f"[1;36m(VllmWorker TP0 pid=1430)[0;0m {AVAILABLE}", ["ansi"]),
        (f'<font color="#00CDCD">(VllmWorker TP0 pid=1430)</font> {AVAILABLE}', ["html"]),
        (f"2025-09-03T00:40:53.123456789Z (VllmWorker TP0 pid=1430) {AVAILABLE}", ["timestamp"]),
        (f"Dec 07 10:00:00 gpu-1 vllm[123]: (VllmWorker TP0 pid=1430) {AVAILABLE}", ["syslog"]),
        (f"│ (VllmWorker TP0 pid=1430) {AVAILABLE}            │", ["border"]),
        (f"    (VllmWorker TP0 pid=1430) {AVAILABLE}", ["indent"]),
        (f"> (VllmWorker TP0 pid=1430) {AVAILABLE}", ["quote"]),
        (f"\r(VllmWorker TP0 pid=1430) {AVAILABLE}", ["carriage-return"]),
        (f"(VllmWorker TP0 pid=1430) {AVAILABLE}^M", ["carriage-return"]),  # as a terminal shows it, copied
        (f"(VllmWorker TP0 pid=1430) {AVAILABLE} [repeated 3x across cluster]", ["ray-repeated"]),
        (
            f"2025-09-03T00:40:53Z \x1b[36m(RayWorkerWrapper pid=6)\x1b[0m {AVAILABLE} [repeated 3x across cluster]",
            ["timestamp", "ray-repeated", "ansi"],
        ),
    ],
)
def test_a_real_wrapper_is_peeled_and_named(line: str, kinds: list[str]) -> None:
    out, dead = _migrate(line + "\n")
    assert dead == []
    (event,) = _events(out)
    assert event["available_bytes"] == 12906376724
    assert _wrappers(event) == kinds
    assert event["migrated"]["steps"][len(kinds)] == "vllm-text/2025-03", "then the wording's own step"
    assert "original" not in event["migrated"], "a wrapper is named, not a reason to copy the line"


def test_a_wrapper_instant_dates_a_line_without_a_year() -> None:
    out, _ = _migrate(f"2024-09-03T00:40:53.5+02:00 stdout F (VllmWorker TP0 pid=1) {AVAILABLE}\n")
    (event,) = _events(out)
    assert event["timestamp"] == "2024-09-02T22:40:53.5Z"
    assert event["migrated"]["inferred"]["timestamp"]["rule"] == "wrapper-timestamp"


def test_a_dated_server_prefix_keeps_its_own_time() -> None:
    out, _ = _migrate(f"2024-09-03T00:40:53Z [2025-10-03 14:38:55 TP1] {SGLANG_POOL}\n")
    (event,) = _events(out)
    assert event["timestamp"] == "2025-10-03T14:38:55Z"
    assert _wrappers(event) == ["timestamp"]


def test_text_output_keeps_the_wrapper_around_the_line() -> None:
    line = f"Dec 07 10:00:00 gpu-1 vllm[123]: (VllmWorker TP0 pid=1) {AVAILABLE} [repeated 3x across cluster]\n"
    out, _ = _migrate(line, TEXT)
    assert out.startswith(b"Dec 07 10:00:00 gpu-1 vllm[123]: [")
    assert out.endswith(b" [repeated 3x across cluster]\n")


def test_a_wrapped_memory_line_no_wording_reads_is_dead_lettered() -> None:
    out, dead = _migrate("2025-09-03T00:40:53Z (VllmWorker TP0 pid=1) INFO 09-03 00:40:53 [a.py:1] Frobbed 3.5 GiB\n")
    assert [letter["line"] for letter in dead] == [1]
    assert out.startswith(b"2025-09-03T00:40:53Z (VllmWorker")


def test_a_vllm_prefix_cut_to_its_source_location_gives_the_message_and_no_time() -> None:
    """``[kv_cache_utils.py:868] Maximum concurrency …``, as users paste a line whose start they cut."""
    message = "Maximum concurrency for 100,000 tokens per request: 2.31x"
    split = VLLM.split(f"[kv_cache_utils.py:868] {message}")
    assert (split.timestamp, split.partial, split.ranks, split.message) == (None, None, {}, message)
    assert VLLM.split(f"[not a location] {message}").message == f"[not a location] {message}"
