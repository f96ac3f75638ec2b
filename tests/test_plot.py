"""``kvlog plot``: what the memory figure says, on the real corpus logs, and its console contract.

The figure's point is the seed's: a KV pool's address-space reservation is not memory. These tests
pin that down where an operator reads it: the timeline never counts a VA upper bound as committed
memory, the figure draws it as a trace of its own (hatched, dashed), host pools sit on their own
axis, and every inferred state carries its evidence to the hover text. The browser proves the HTML
draws (``test_plot_browser.py``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from html import escape
from pathlib import Path
from typing import Any

import orjson
import pytest
from plot_helpers import DOCS_FIGURE, GIB, HYBRID, POSTCAPTURE, events_of, kvlog_plot, runs_of

from kvlog import commands
from kvlog.commands._plot import plot
from kvlog.plot import figure as names
from kvlog.plot.figure import memory_figure
from kvlog.plot.timeline import Sample, Timeline, timelines

#: the seed's lie: 208 GiB printed as allocated on a 139 GiB device; a later line states 49.58 GiB committed
SEED_LOG = """\
[2026-08-10 09:58:00 TP0] Load weight begin. avail mem=139.06 GB
[2026-08-10 09:59:40 TP0] Load weight end. elapsed=100.00 s, type=LlamaForCausalLM, dtype=torch.bfloat16, \
avail mem=72.91 GB, mem usage=66.15 GB.
[2026-08-10 10:00:05 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1703936, K size: 104.00 GB, \
V size: 104.00 GB
[2026-08-10 10:00:05 TP0] Memory pool end. avail mem=72.80 GB
[2026-08-10 10:00:30 TP0] Post-capture KV sizing: full_layer_tokens=812345, swa_layer_tokens=0
[2026-08-10 10:00:30 TP0] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 812345, \
KV size: 49.58 GB, avail mem=3.21 GB
"""


def run_titled(runs: list[Timeline], title: str) -> Timeline:
    return next(run for run in runs if title in run.title)


def at_line(run: Timeline, line: int) -> Sample:
    return next(sample for sample in run.samples if sample.at.endswith(f":{line}"))


def traces_of_row(figure: Any, row: int) -> list[Any]:
    axis = "x" if row == 1 else f"x{row}"
    return [trace for trace in figure.data if trace.xaxis == axis]


# -- the timeline: what counts as memory ---------------------------------------------------------------


def test_an_inferred_va_upper_bound_is_not_memory_and_carries_its_evidence() -> None:
    run = run_titled(runs_of(POSTCAPTURE), "TP0 · run 1")
    pool = at_line(run, 7)  # "KV Cache is allocated ... K size: 36.88 GB, V size: 36.88 GB" after an arena line
    assert (pool.state, pool.kv_committed, pool.kv_va_bound) == ("va_upper_bound", 0, 2 * 39599598469)
    assert at_line(run, 9).free == 78136192532  # free memory after the "allocation": 72.77 GiB, not 0
    (inference,) = pool.inferred
    assert (inference.field, inference.rule) == ("allocation_state", "arena-before-pool")
    assert inference.evidence_at == f"{POSTCAPTURE}:5"
    assert inference.evidence_original == (
        "[2026-07-21 09:02:11 TP0] KvVmmArena[0] ready: device=0 reserved=78.8 GiB granularity=2048 KiB"
    )
    assert pool.original is not None and "K size: 36.88 GB" in pool.original
    draft = at_line(run, 10)  # the speculative draft pool after it is really allocated
    assert (draft.state, draft.kv_committed, draft.kv_va_bound) == ("allocated", 2 * 493921239, 2 * 39599598469)


def test_a_committed_size_a_later_line_states_takes_effect_at_that_line(tmp_path: Path) -> None:
    log = tmp_path / "seed.log"
    log.write_text(SEED_LOG)
    (run,) = runs_of(log)
    pool, sized = at_line(run, 3), at_line(run, 6)
    bound, committed = 208 * GIB, round(49.58 * GIB)
    assert (pool.kv_committed, pool.kv_va_bound) == (0, bound)  # not committed before capture
    assert (sized.kv_committed, sized.kv_va_bound, sized.free) == (committed, bound - committed, round(3.21 * GIB))
    assert [(i.field, i.rule, i.evidence_at) for i in pool.inferred] == [
        ("allocation_state", "device-memory-bound", f"{log}:1"),  # 208 GiB cannot be held by 139.06 GiB free
        ("committed_bytes", "post-capture-committed", f"{log}:6"),
    ]
    assert "KV size: 49.58 GB" in str(pool.inferred[1].evidence_original)
    assert at_line(run, 2).weights == run.samples[-1].weights == round(66.15 * GIB)


def test_runs_start_at_load_begin_per_rank_and_file() -> None:
    titles = [run.title.split(" (")[0] for run in runs_of(POSTCAPTURE, HYBRID)]
    assert titles == [
        "postcapture_before_fix_2026_07.log · TP0 · run 1",
        "postcapture_before_fix_2026_07.log · TP1 · run 1",
        *(f"postcapture_before_fix_2026_07.log · TP0 · run {n}" for n in (2, 3, 4, 5)),
        "hybrid_swa_2026.log · TP0 · run 1",
        "hybrid_swa_2026.log · TP1 · run 1",
    ]


def test_hybrid_sub_pools_count_once_and_host_pools_apart() -> None:
    tp0, tp1 = runs_of(HYBRID)
    sub_pools = 2 * 4348654387 + 2 * 5433133629
    assert tp0.samples[-1].kv_committed == tp1.samples[-1].kv_committed == sub_pools  # the summary adds nothing
    assert tp0.samples[-1].kv_va_bound == 0
    assert tp0.samples[-1].host == 21_730_000_000 + 8_690_000_000
    assert (tp0.has_host, tp1.has_host) == (True, False)


def test_kvlog_event_files_draw_as_their_logs(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    outcome = commands.migrate([POSTCAPTURE], output=events, only_events=True, keep_original=True)
    assert outcome.exit_status == commands.EXIT_OK
    assert runs_of(events) == runs_of(POSTCAPTURE)


VLLM_LOG = """\
(EngineCore_DP0 pid=2390) INFO 06-01 10:00:09 [gpu_model_runner.py:1932] Model loading took 14.9935 GiB memory and \
5.412345 seconds
(EngineCore_DP0 pid=2390) INFO 06-01 10:00:15 [gpu_worker.py:276] Available KV cache memory: 56.22 GiB
(EngineCore_DP0 pid=2390) INFO 06-01 10:00:15 [kv_cache_utils.py:849] GPU KV cache size: 460,544 tokens
"""


def test_a_kv_cache_budget_is_not_drawn_as_free_memory(tmp_path: Path) -> None:
    """vLLM's ``Available KV cache memory`` is what the KV cache is about to take, not memory left free."""
    log = tmp_path / "vllm.log"
    log.write_text(VLLM_LOG)
    (run,) = runs_of(log)
    assert [(sample.event, sample.weights, sample.free) for sample in run.samples] == [
        ("weights.load_end", 16099148038, None)
    ]


#: kvlog's own pools on the host backend, their events written for real to a JSON-lines file
EMITTER = """
import sys
import torch
from kvlog.emission import configure
from kvlog.memory import KVShape, MHAKVPool, SWAKVPool

shape = KVShape(layers=3, heads=4, head_dim=64, dtype=torch.bfloat16, page_size=16)
with open(sys.argv[1], "wb") as out:
    configure(output="json", validation="raise", stream=out)
    with MHAKVPool.plan(shape, upper_bound_tokens=65536) as pool:
        pool.finalize(budget_bytes=10 << 20, free_bytes=20 << 20)
        pool.sleep()
        pool.wake()
        print(pool.committed_bytes)
    with SWAKVPool.plan(shape, shape, full_upper_bound_tokens=32768, swa_upper_bound_tokens=4096) as pool:
        pool.finalize(budget_bytes=8 << 20, free_bytes=9 << 20)
        print(pool.full.committed_bytes + pool.swa.committed_bytes)
"""


def test_live_events_count_what_the_arenas_commit(tmp_path: Path) -> None:
    """kvlog's own events: the arenas' bookkeeping is the memory, a planned pool's rest its VA band."""
    log = tmp_path / "live.jsonl"
    emitted = subprocess.run([sys.executable, "-c", EMITTER, log], capture_output=True, text=True, check=True)
    mha_committed, swa_committed = map(int, emitted.stdout.split())
    (run,) = runs_of(log)
    by_event: dict[str, list[Sample]] = {}
    for sample in run.samples:
        by_event.setdefault(sample.event, []).append(sample)
    planned, allocated = by_event["kv_pool.allocation"][:2]
    assert planned.state == "va_upper_bound" and planned.kv_committed == 49152  # the first page of each buffer
    assert planned.kv_committed + planned.kv_va_bound == 2 * 3 * (65536 + 16) * 4 * 64 * 2  # K + V, as shaped
    assert (allocated.state, allocated.kv_committed, allocated.kv_va_bound) == ("allocated", mha_committed, 0)
    assert (by_event["kv_pool.sleep"][0].kv_committed, by_event["kv_pool.wake"][0].kv_committed) == (0, mha_committed)
    summary, final = by_event["kv_pool.swa_summary"]
    assert summary.kv_committed == 2 * 49152  # the sub-pools' first pages, not counted again by their summary
    assert (final.kv_committed, final.kv_va_bound) == (swa_committed, 0)
    assert run.samples[-1].kv_committed == 0 and run.samples[-1].event == "kv_arena.closed"


# -- the figure ------------------------------------------------------------------------------------------


def test_the_va_upper_bound_is_a_hatched_dashed_trace_apart_from_committed_memory() -> None:
    runs = runs_of(POSTCAPTURE)
    figure = memory_figure(runs)
    first = {trace.name: trace for trace in traces_of_row(figure, 1)}
    va, committed = first[names.VA_BOUND], first[names.COMMITTED]
    assert va.fillpattern.shape == "/" and va.line.dash == "dash" and va.fill == "tonexty"
    assert committed.fillpattern.shape is None and committed.line.dash is None
    pool = [sample.time for sample in runs[0].samples].index(at_line(runs[0], 7).time)
    weights = first[names.WEIGHTS].y[pool]
    assert committed.y[pool] == weights  # nothing committed by the pool line
    assert va.y[pool] * GIB == pytest.approx(weights * GIB + 2 * 39599598469)
    legend = [trace.name for trace in figure.data if trace.showlegend]
    assert legend == [names.WEIGHTS, names.COMMITTED, names.VA_BOUND, names.FREE, names.INFERRED]


def test_host_pools_have_their_own_axis() -> None:
    figure = memory_figure(runs_of(HYBRID))
    row = {trace.name: trace for trace in traces_of_row(figure, 1)}
    host, device = row[names.HOST], row[names.COMMITTED]
    assert host.yaxis != device.yaxis
    axis = figure.layout["yaxis" + host.yaxis[1:]]
    assert axis.title.text == "host memory (GiB)" and axis.side == "right"
    assert host.y[-1] * GIB == pytest.approx(30_420_000_000)
    assert names.HOST not in {trace.name for trace in traces_of_row(figure, 2)}  # TP1 has none


def test_inferred_points_show_their_rule_evidence_and_lines_on_hover() -> None:
    runs = runs_of(POSTCAPTURE)
    figure = memory_figure(runs)
    row = {trace.name: trace for trace in traces_of_row(figure, 1)}
    marks = row[names.INFERRED]
    assert marks.marker.symbol == "diamond-open"
    hover = marks.hovertext[0]
    assert "<b>allocation_state inferred</b>, rule arena-before-pool: KvVmmArena[0] ready, 84610855731 bytes" in hover
    assert f"evidence line {POSTCAPTURE}:5: [2026-07-21 09:02:11 TP0] KvVmmArena[0] ready: device=0" in hover
    assert "original line: [2026-07-21 09:02:11 TP0] KV Cache is allocated. dtype: torch.bfloat16" in hover
    pool = runs[0].samples.index(at_line(runs[0], 7))
    assert (marks.x[0], marks.y[0]) == (row[names.VA_BOUND].x[pool], row[names.VA_BOUND].y[pool])  # atop its band
    draft = runs[0].samples.index(at_line(runs[0], 10))  # an inferred allocation: atop committed memory
    assert (marks.x[1], marks.y[1]) == (row[names.COMMITTED].x[draft], row[names.COMMITTED].y[draft])
    assert "rule v1-claims-allocated" in marks.hovertext[1]


def test_hover_text_escapes_what_the_log_printed(tmp_path: Path) -> None:
    log = tmp_path / "x<b>.log"
    log.write_text(SEED_LOG)
    figure = memory_figure(runs_of(log))
    text = "".join(str(trace.hovertext) for trace in figure.data)
    assert escape(f"{log}:3") in text and "x<b>.log" not in text
    assert escape(str(log.name)) in figure.layout.annotations[0].text


# -- the command and its console contract ------------------------------------------------------------------


def test_html_is_written_self_contained(tmp_path: Path) -> None:
    out = tmp_path / "memory.html"
    result = kvlog_plot(POSTCAPTURE, HYBRID, "-o", out)
    assert result.returncode == commands.EXIT_OK, result.stderr
    assert result.stderr == f"kvlog plot: 46 event(s), 8 run(s) drawn to {out}\n"
    html = out.read_text()
    assert re.search(r"<script[^>]*\bsrc=", html) is None  # nothing to fetch: plotly.js is inline
    assert "Plotly.newPlot" in html and len(html) > 3_000_000


def test_plot_returns_its_outcome(tmp_path: Path) -> None:
    notices: list[str] = []
    out = tmp_path / "memory.html"
    outcome = plot([HYBRID.parent / "hybrid_*.log", tmp_path / "missing.log"], output=out, on_notice=notices.append)
    assert (outcome.exit_status, outcome.output, outcome.events, outcome.runs) == (commands.EXIT_ERROR, out, 12, 2)
    assert out.is_file()  # what could be read is drawn
    assert len(notices) == 1 and "missing.log" in notices[0] and notices == list(outcome.problems)


def test_no_event_to_plot_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "quiet.log"
    log.write_text("[2026-08-10 10:00:05 TP0] Prefill batch. #new-seq: 1\nhello\n")
    out = tmp_path / "memory.html"
    result = kvlog_plot(log, "-o", out)
    assert result.returncode == commands.EXIT_FINDINGS
    assert result.stderr == "kvlog plot: 0 event(s) read, none about memory: nothing to plot\n"
    assert not out.exists()


def test_an_unreadable_input_is_named_without_a_traceback(tmp_path: Path) -> None:
    result = kvlog_plot(tmp_path / "missing.log", "-o", tmp_path / "memory.html")
    assert result.returncode == commands.EXIT_ERROR
    assert "missing.log" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.endswith("kvlog plot: 0 event(s) read, none about memory: nothing to plot\n")


def test_the_suffix_chooses_the_format(tmp_path: Path) -> None:
    result = kvlog_plot(POSTCAPTURE, "-o", tmp_path / "memory.pdf")
    assert result.returncode == commands.EXIT_ERROR
    assert (
        result.stderr
        == f"kvlog plot: -o {tmp_path / 'memory.pdf'}: the suffix chooses the format, one of .html, .png, .svg\n"
    )


@pytest.mark.parametrize(
    ("hidden", "suffix"), [("plotly", ".html"), ("plotly", ".png"), ("kaleido", ".png"), ("kaleido", ".svg")]
)
def test_a_missing_extra_is_named_with_its_install_command(tmp_path: Path, hidden: str, suffix: str) -> None:
    out = tmp_path / f"memory{suffix}"
    result = kvlog_plot(POSTCAPTURE, "-o", out, prelude=f"import sys; sys.modules[{hidden!r}] = None")
    assert result.returncode == commands.EXIT_ERROR
    assert result.stderr == (
        f"kvlog plot: kvlog plot needs the plot extra: pip install 'kvlog[plot]' ({hidden} is not installed)\n"
    )
    assert not out.exists()


def test_html_needs_no_image_renderer(tmp_path: Path) -> None:
    out = tmp_path / "memory.html"
    result = kvlog_plot(HYBRID, "-o", out, prelude="import sys; sys.modules['kaleido'] = None")
    assert result.returncode == commands.EXIT_OK, result.stderr
    assert out.is_file()


def test_the_readme_figure_is_drawn_from_the_corpus_by_this_code() -> None:
    """``docs/memory.svg`` shows every run of its inputs and today's legend (regenerate it as the README says)."""
    svg = DOCS_FIGURE.read_text()
    assert DOCS_FIGURE.stat().st_size < 300_000
    for run in runs_of(POSTCAPTURE, HYBRID):
        assert escape(run.title, quote=False) in svg
    for name in (names.WEIGHTS, names.COMMITTED, names.VA_BOUND, names.FREE, names.HOST, names.INFERRED):
        assert escape(name, quote=False) in svg


def test_invalid_events_are_not_drawn_and_the_summary_line_counts_them(tmp_path: Path) -> None:
    """kvlog migrate copies a current event as it is, so a file of events may hand the plot invalid ones."""
    events = [dict(event) for event in events_of(POSTCAPTURE)]
    pool = next(event for event in events if event["event"] == "kv_pool.allocation")
    invalid = [pool | {"pool": []}, pool | {"arena_ids": 7}, pool | {"ranks": {"tp": [0]}}, pool | {"pool": {}}]
    left_out: list[dict[str, Any]] = []
    assert timelines([*events, *invalid], left_out.append) == timelines(events)
    assert left_out == invalid
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in [*events, *invalid]))
    done = kvlog_plot(mixed, "-o", tmp_path / "mixed.html")
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith("; 4 invalid event(s) left out (kvlog validate says why)\n")
    assert "Traceback" not in done.stderr


#: sglang before 0.4.x printed the free memory before and after the load, and no ``mem usage=``
UNSTATED_WEIGHTS = """\
[2025-02-01 10:00:00 TP0] Load weight begin. avail mem=139.06 GB
[2025-02-01 10:01:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=72.91 GB
[2025-02-01 10:02:00 TP0] KV Cache is allocated. K size: 20.00 GB, V size: 20.00 GB.
[2025-02-01 10:02:00 TP1] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=72.91 GB
[2025-02-01 10:02:01 TP1] KV Cache is allocated. K size: 20.00 GB, V size: 20.00 GB.
"""


def test_weights_no_line_states_are_the_loads_drop_marked_inferred_or_unknown_never_zero(tmp_path: Path) -> None:
    """TP0 printed the free memory before and after its load: the drop, inferred; TP1 only after: unknown."""
    log = tmp_path / "old.log"
    log.write_text(UNSTATED_WEIGHTS)
    tp0, tp1 = runs_of(log)
    loaded = at_line(tp0, 2)
    assert (loaded.weights, loaded.weights_inferred) == (round(139.06 * GIB) - round(72.91 * GIB), True)
    (inference,) = loaded.inferred
    assert (inference.field, inference.rule, inference.evidence_at) == ("weights", "load-free-memory-drop", f"{log}:1")
    assert tp0.samples[-1].weights == loaded.weights and tp0.samples[-1].weights_inferred
    assert {sample.weights for sample in tp1.samples} == {None}
    figure = memory_figure([tp0, tp1])
    hover = {trace.name: trace.hovertext for trace in figure.data}
    assert "weights 66.1 GiB (inferred)" in hover[names.WEIGHTS][-1]
    tp1_hover = " ".join(str(trace.hovertext) for trace in traces_of_row(figure, 2))
    assert "weights unknown" in tp1_hover and "weights 0 B" not in tp1_hover
    assert names.WEIGHTS not in {trace.name for trace in traces_of_row(figure, 2)}  # nothing drawn as weights
