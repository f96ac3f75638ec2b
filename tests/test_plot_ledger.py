"""``kvlog plot --view ledger``: the ledger's rows as a stacked bar per rank, checked against the rows themselves.

Each bar is ``kvlog ledger``'s row of that rank: the tests read the rows from ``commands.ledger`` and
check that the figure stacks exactly their figures, leaves out what no line states, keeps the KV
address space out of the stack, and shows every flag and rounding. The browser's pixels are
``test_plot_ledger_browser.py``'s.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
from html import escape
from pathlib import Path
from typing import Any

import pytest
from plot_helpers import HYBRID, POSTCAPTURE, kvlog_plot
from test_ledger import current, own_events

from kvlog import commands
from kvlog.ledger import CONSUMERS, Figure, LedgerRow
from kvlog.plot import figure as timeline_names
from kvlog.plot import ledger_figure as names
from kvlog.plot.ledger_figure import STACK_OFFSET, STACK_WIDTH, VA_OFFSET, ledger_figure, panels_of

GIB = 1 << 30
DOCS = Path(__file__).resolve().parent.parent / "docs" / "ledger.svg"
#: rank 0 states every figure (unaccounted 2 GiB); rank 1 no weights (unaccounted 20 GiB: flagged); rank 2 is
#: rank 0 but for its pool, 100 GiB of KV address space of which 50 committed, on an 80 GiB device (flagged)
RANKS: dict[int, list[str]] = {
    0: [
        current("weights.load_end", mem_usage_bytes=15 * GIB),
        current("cuda_graph.captured", mem_usage_bytes=3 * GIB),
        current("kv_pool.allocation", layout="mha", k_bytes=25 * GIB, v_bytes=25 * GIB, allocation_state="allocated"),
        current("kv_memory.pool_end", avail_bytes=10 * GIB),
    ],
    1: [
        current("kv_pool.allocation", layout="mha", k_bytes=25 * GIB, v_bytes=25 * GIB, allocation_state="allocated"),
        current("kv_memory.pool_end", avail_bytes=10 * GIB),
    ],
    2: [
        current("weights.load_end", mem_usage_bytes=15 * GIB),
        current("cuda_graph.captured", mem_usage_bytes=3 * GIB),
        current(
            "kv_pool.allocation",
            layout="mha",
            k_bytes=50 * GIB,
            v_bytes=50 * GIB,
            allocation_state="va_upper_bound",
            committed_bytes=50 * GIB,
        ),
        current("kv_memory.pool_end", avail_bytes=10 * GIB),
    ],
}
BUDGET = current("memory.profile_budget", total_bytes=80 * GIB, gpu_memory_utilization=0.9, budget_bytes=72 * GIB)


def three_ranks(tmp_path: Path) -> Path:
    """The three ranks' own events (exact bytes), each rank's run opened by its budget line."""
    lines = [line.replace('"tp": 0', f'"tp": {rank}') for rank, events in RANKS.items() for line in [BUDGET, *events]]
    return own_events(tmp_path, *lines)


def sglang_grid(tmp_path: Path, runs: int = 3, dp: int = 2, tp: int = 8, name: str = "tp8.log") -> Path:
    """An sglang TP x DP start-up, ``runs`` times: load, pool and pool end of every rank, DP1 TP5 differing."""
    lines = []
    for run in range(runs):
        for group in range(dp):
            for rank in range(tp):
                at = f"[2026-07-{run + 1:02} 09:00:{10 + rank:02} DP{group} TP{rank}]"
                free = "12.40" if (group, rank) == (dp - 1, tp - 3) else "18.80"
                lines += [
                    f"{at} Load weight begin. avail mem=139.06 GB",
                    f"{at} Load weight end. type=LlamaForCausalLM, avail mem=72.91 GB, mem usage=66.15 GB.",
                    f"{at} KV Cache is allocated. #tokens: 1703936, K size: 20.00 GB, V size: 20.00 GB",
                    f"{at} Memory pool end. avail mem={free} GB",
                ]
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def rows_of(*paths: Path, **options: Any) -> tuple[LedgerRow, ...]:
    outcome = commands.ledger([str(path) for path in paths], stdout=io.BytesIO(), **options)
    assert outcome.exit_status == commands.EXIT_OK
    return outcome.rows


def grid_of(figure: Any) -> tuple[int, int]:
    """How many rows and columns of panels the figure laid out: its axes' distinct domains."""
    layout = figure.layout
    rows = {layout[name].domain for name in layout if name.startswith("yaxis")}
    columns = {layout[name].domain for name in layout if name.startswith("xaxis")}
    return len(rows), len(columns)


def bars(figure: Any) -> list[Any]:
    return [trace for trace in figure.data if trace.type == "bar"]


def stack(figure: Any, axis: str, position: int) -> list[tuple[str, float, float]]:
    """The stack at ``position`` of the panel on ``axis``, bottom up: (layer, base, height) in GiB."""
    return [
        (trace.name, trace.base[position], trace.y[position])
        for trace in bars(figure)
        if trace.xaxis == axis and trace.name != timeline_names.VA_BOUND and trace.y[position] is not None
    ]


def test_each_rank_is_one_stack_of_its_ledger_row_bottom_up(tmp_path: Path) -> None:
    rows = rows_of(three_ranks(tmp_path))
    figure = ledger_figure(rows)
    assert [row.ranks for row in rows] == ["TP0", "TP1", "TP2"]
    # rank 0: weights 15, CUDA graphs 3, KV 50, free 10, unaccounted 80 - 78 = 2 (GiB), stacked in that order
    assert stack(figure, "x", 0) == [
        ("weights", 0, 15),
        ("cuda graph", 15, 3),
        (timeline_names.COMMITTED, 18, 50),
        (names.FREE, 68, 10),
        (names.UNACCOUNTED, 78, 2),
    ]
    for position, row in enumerate(rows):  # every known figure of the row, once; the stack tops at the total
        layers = stack(figure, "x", position)
        known = [figure for _, figure in row.consumers if figure.known] + [row.kv_committed, row.free, row.unaccounted]
        assert [height * GIB for _, _, height in layers] == [figure.value for figure in known if figure.known]
        assert all(base + height == above[1] for (_, base, height), above in itertools.pairwise(layers))
        assert layers[-1][1] + layers[-1][2] == 80
    # every segment is the stack's own bar: one offset and width, beside which the address space stands
    assert {(trace.offset, trace.width) for trace in bars(figure) if trace.name != timeline_names.VA_BOUND} == {
        (STACK_OFFSET, STACK_WIDTH)
    }


def test_a_consumer_no_line_states_is_absent_not_zero(tmp_path: Path) -> None:
    figure = ledger_figure(rows_of(three_ranks(tmp_path)))
    [weights] = [trace for trace in figure.data if trace.name == "weights"]
    assert weights.y == (15, None, 15)  # rank 1 states no weights: no segment, not a 0 GiB one
    unstated = "no line states: weights, non torch, activation peak, runtime, cuda graph, aux buffers, mamba pool"
    assert unstated in weights.hovertext[1]
    # a consumer no rank of the panel states has no trace at all
    drawn = {trace.name for trace in figure.data}
    assert drawn.isdisjoint({"non torch", "activation peak", "mamba pool"})
    assert "cuda graph" in drawn


def test_the_kv_address_space_stands_beside_the_stack_from_where_kv_starts_never_in_it(tmp_path: Path) -> None:
    rows = rows_of(three_ranks(tmp_path))
    figure = ledger_figure(rows)
    [va] = [trace for trace in figure.data if trace.name == timeline_names.VA_BOUND]
    assert va.y == (None, None, 100)  # only rank 2 reserved address space
    assert va.base[2] == 18  # from where its KV memory starts, above its weights and CUDA graphs
    assert va.offset >= STACK_OFFSET + STACK_WIDTH  # beside the stack, never over it
    assert va.marker.pattern.shape == "/"  # hatched
    assert stack(figure, "x", 2)[-1][1] + stack(figure, "x", 2)[-1][2] == 80  # the stack still tops at the total
    # the axis reaches the outline's top (118 GiB), beyond the 80 GiB device
    assert figure.layout.yaxis.range[1] > 118 > 80
    assert va.offset == VA_OFFSET
    # a reservation whose committed memory no line states still rises from above the consumers
    unknown = dataclasses.replace(rows[2], kv_committed=Figure(None))
    [va] = [trace for trace in ledger_figure([unknown]).data if trace.name == timeline_names.VA_BOUND]
    assert va.base == (18,)


def test_the_device_total_is_a_line_across_each_bar(tmp_path: Path) -> None:
    figure = ledger_figure(rows_of(three_ranks(tmp_path)))
    [total] = [trace for trace in figure.data if trace.name == names.TOTAL]
    assert [y for y in total.y if y is not None] == [80] * 6
    assert [x for x in total.x if x is not None][:2] == [STACK_OFFSET, STACK_OFFSET + STACK_WIDTH]
    # sglang prints no total: the line is the free memory before the load, and its hover says so
    figure = ledger_figure(rows_of(sglang_grid(tmp_path, runs=1, dp=1, tp=2)))
    [total] = [trace for trace in figure.data if trace.name == names.TOTAL]
    assert {round(y, 2) for y in total.y if y is not None} == {139.06}
    assert "free before the load (no line states the total)" in total.hovertext[0]


def test_flags_and_roundings_are_shown_on_the_bars(tmp_path: Path) -> None:
    rows = rows_of(three_ranks(tmp_path))
    assert [[flag.split(":")[0] for flag in row.flags] for row in rows] == [[], ["unaccounted"], ["kv_va_above_device"]]
    figure = ledger_figure(rows)
    [flagged] = [trace for trace in figure.data if trace.name == names.FLAGGED]
    assert [round(x - STACK_OFFSET - STACK_WIDTH / 2, 6) for x in flagged.x] == [1, 2]
    assert "unaccounted: 20.0 GiB beyond 2.00 GiB" in flagged.hovertext[0]
    assert "kv_va_above_device" in flagged.hovertext[1]
    assert figure.layout.xaxis.ticktext == ("TP0", "TP1 !", "TP2 !")
    for trace in bars(figure):  # every segment of a flagged rank says its flags too
        assert trace.y[1] is None or "unaccounted: 20.0 GiB" in trace.hovertext[1]
    # the rounding a figure's line printed, and the line, on its hover; unaccounted's range as an error bar
    rows = rows_of(sglang_grid(tmp_path, runs=1, dp=1, tp=1))
    figure = ledger_figure(rows)
    [weights] = [trace for trace in figure.data if trace.name == "weights"]
    assert "weights: 66.15 GiB ± 5.12 MiB" in weights.hovertext[0] and "from tp8.log:2" in weights.hovertext[0]
    rows = [dataclasses.replace(rows[0], unaccounted=Figure(GIB, 3 * 5368710, ()), device_total=Figure(140 * GIB))]
    [unaccounted] = [trace for trace in ledger_figure(rows).data if trace.name == names.UNACCOUNTED]
    assert unaccounted.error_y.array == (3 * 5368710 / GIB,)


def test_unaccounted_below_zero_is_not_stacked_and_the_hover_says_by_how_much(tmp_path: Path) -> None:
    [row] = rows_of(sglang_grid(tmp_path, runs=1, dp=1, tp=1))
    over = dataclasses.replace(row, device_total=Figure(120 * GIB), unaccounted=Figure(-5 * GIB, 4 * 5368710))
    figure = ledger_figure([over])
    assert names.UNACCOUNTED not in {trace.name for trace in figure.data}
    assert "the figures add to 5.00 GiB more than the total" in figure.data[0].hovertext[0]


def test_the_consumers_are_the_ledger_s_table_s_whatever_it_names(tmp_path: Path) -> None:
    """A consumer another event adds to ``DEVICE_CONSUMERS`` is drawn with no change here."""
    rows = rows_of(three_ranks(tmp_path))
    added = [
        dataclasses.replace(row, consumers=(*row.consumers, ("lora_adapters", Figure(GIB, 0, ("x:1",)))))
        for row in rows
    ]
    figure = ledger_figure(added)
    layers = [name for name, _, _ in stack(figure, "x", 0)]
    assert layers == ["weights", "cuda graph", "lora adapters", *layers[3:]]
    assert layers[3] == timeline_names.COMMITTED
    colours = [trace.marker.color for trace in bars(figure) if trace.xaxis == "x"]
    assert len(set(colours)) == len(colours)  # each layer a colour of its own
    drawn = [trace.name for trace in bars(figure)]
    known = [name.replace("_", " ") for name in CONSUMERS if name.replace("_", " ") in drawn]
    assert [name for name in drawn if name in known] == known  # in the table's order
    # a table of many more consumers (issue 33's start-up, NCCL, buffers by kind, ...): still a colour each
    many = [(f"consumer_{n}", Figure(GIB)) for n in range(24)]
    figure = ledger_figure([dataclasses.replace(rows[0], consumers=(*rows[0].consumers, *many))])
    colours = [trace.marker.color for trace in bars(figure)]
    assert len(colours) == 2 + 24 + 3 and len(set(colours)) == len(colours)


def test_tp8_by_dp_by_runs_is_a_grid_with_a_run_s_groups_side_by_side(tmp_path: Path) -> None:
    rows = rows_of(sglang_grid(tmp_path, runs=3, dp=2, tp=8))
    panels = panels_of(rows)
    assert [panel.title.split(" (")[0] for panel in panels] == [
        f"tp8.log · DP{group} · run {run}" for run in (1, 2, 3) for group in (0, 1)
    ]
    assert all(panel.labels[0].startswith("TP0") and panel.labels[7].startswith("TP7") for panel in panels)
    figure = ledger_figure(rows)
    assert grid_of(figure) == (3, 2)  # a run a row, its DP groups side by side: not one column
    assert len(bars(figure)) and all(len(trace.x) == 8 for trace in bars(figure))
    # a bar is wide enough to read: its slot's share of its panel's axis, in pixels
    x = figure.layout.xaxis
    inner = figure.layout.width - figure.layout.margin.l - figure.layout.margin.r
    assert (x.domain[1] - x.domain[0]) * inner / (x.range[1] - x.range[0]) * STACK_WIDTH >= 20
    # every panel the same memory axis, so that bars compare across runs
    assert len({figure.layout[name].range for name in figure.layout if name.startswith("yaxis")}) == 1


def test_many_runs_of_few_ranks_wrap_into_columns(tmp_path: Path) -> None:
    paths = [sglang_grid(tmp_path, runs=1, dp=1, tp=2, name=f"node{n:02}.log") for n in range(12)]
    figure = ledger_figure(rows_of(*paths))
    rows, columns = grid_of(figure)
    assert columns >= 4 and rows * columns >= 12 > rows


def test_kvlog_plot_view_ledger_writes_the_ledger_s_figure(tmp_path: Path) -> None:
    log = sglang_grid(tmp_path, runs=1, dp=2, tp=8)
    out = tmp_path / "ledger.html"
    result = kvlog_plot(log, "--view", "ledger", "-o", out)
    assert result.returncode == commands.EXIT_OK, result.stderr
    assert result.stderr == f"kvlog plot: 64 event(s), 16 run(s) drawn to {out}\n"
    html = out.read_text()
    assert '"TP5 !"' in html and names.UNACCOUNTED not in html  # flagged ranks; sglang states no total
    assert "Where the device memory went" in html
    # the threshold is the ledger's: one beyond every rank's unaccounted memory flags none of its own
    events = own_events(tmp_path, *[line.replace('"tp": 0', '"tp": 1') for line in [BUDGET, *RANKS[1]]])
    for threshold, flagged in (("2", True), ("25", False)):
        result = kvlog_plot(events, "--view", "ledger", "--unaccounted-threshold", threshold, "-o", out)
        assert result.returncode == commands.EXIT_OK, result.stderr
        assert ('"TP1 !"' in out.read_text()) is flagged


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--view", "bars"], "Invalid value for '--view': 'bars' is not one of 'timeline', 'ledger'."),
        (["--unaccounted-threshold", "-1"], "Invalid value for '--unaccounted-threshold'"),
    ],
)
def test_a_view_or_threshold_it_does_not_take_is_refused(tmp_path: Path, options: list[str], said: str) -> None:
    out = tmp_path / "ledger.html"
    result = kvlog_plot(HYBRID, *options, "-o", out)
    assert result.returncode == commands.EXIT_ERROR
    assert said in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_the_library_refuses_a_view_it_does_not_draw(tmp_path: Path) -> None:
    with pytest.raises(commands.OptionError, match="view bars: one of timeline, ledger"):
        commands.plot(HYBRID, output=tmp_path / "x.html", view="bars")
    with pytest.raises(commands.OptionError, match="unaccounted_threshold -1: a size, 0 or more"):
        commands.plot(HYBRID, output=tmp_path / "x.html", view="ledger", unaccounted_threshold=-1)


def test_a_log_of_usage_lines_alone_has_no_bar_to_draw(tmp_path: Path) -> None:
    log = tmp_path / "usage.log"
    log.write_text(
        "[2025-02-27 04:41:39 TP0] Decode batch. #running-req: 8, #token: 1000, token usage: 0.10, "
        "gen throughput (token/s): 186.64, #queue-req: 0\n"
    )
    drawn = commands.plot(log, output=tmp_path / "x.html", usage="all", view="ledger")
    assert drawn.exit_status == commands.EXIT_FINDINGS and drawn.output is None
    assert not (tmp_path / "x.html").exists()


def test_the_golden_logs_draw_one_bar_per_ledger_row() -> None:
    rows = rows_of(POSTCAPTURE, HYBRID)
    figure = ledger_figure(rows)
    assert sum(len(panel.rows) for panel in panels_of(rows)) == len(rows)
    assert len(figure.layout.annotations) == len(panels_of(rows))  # a title a panel


def test_the_docs_figure_is_drawn_from_the_golden_logs_by_this_code() -> None:
    """``docs/ledger.svg`` shows every panel and today's legend (docs/ledger.md says how to regenerate it)."""
    svg = DOCS.read_text()
    assert DOCS.stat().st_size < 300_000
    rows = rows_of(POSTCAPTURE, HYBRID)
    for panel in panels_of(rows):
        name, _, rest = panel.title.partition(" · ")
        assert escape(name, quote=False) in svg and escape(rest, quote=False) in svg
    for trace_name in {trace.name for trace in ledger_figure(rows).data}:
        assert f">{escape(trace_name, quote=False)}<" in svg


def test_expert_parallel_ranks_are_bars_of_their_tp_panel_in_numeric_order(tmp_path: Path) -> None:
    """sglang's ``EP`` ranks subdivide its TP group: a panel per DP group still, its bars TP0 ... TP11."""
    log = tmp_path / "ep.log"
    log.write_text(
        "".join(
            f"[2026-07-21 09:00:{rank:02} DP{group} TP{rank} EP{rank}] {line}\n"
            for group in range(2)
            for rank in (11, 2, 0, 1, 10, 3, 4, 5, 6, 7, 8, 9)
            for line in ("Load weight begin. avail mem=139.06 GB", "Memory pool end. avail mem=18.80 GB")
        )
    )
    panels = panels_of(rows_of(log))
    assert [panel.title.split(" (")[0] for panel in panels] == ["ep.log · DP0 · run 1", "ep.log · DP1 · run 1"]
    assert [panel.labels for panel in panels] == [tuple(f"TP{rank} EP{rank}" for rank in range(12))] * 2


def test_the_ledger_view_needs_the_plot_extra_as_the_timeline_does(tmp_path: Path) -> None:
    out = tmp_path / "ledger.html"
    result = kvlog_plot(POSTCAPTURE, "--view", "ledger", "-o", out, prelude="import sys; sys.modules['plotly'] = None")
    assert result.returncode == commands.EXIT_ERROR
    assert (
        result.stderr
        == "kvlog plot: kvlog plot needs the plot extra: pip install 'kvlog[plot]' (plotly is not installed)\n"
    )
    assert not out.exists()


def test_a_run_of_more_groups_than_a_row_holds_starts_a_row_of_its_own(tmp_path: Path) -> None:
    """TP8 x DP4: four panels a run, three a row; each run starts at the first column, DP0 under DP0."""
    rows = rows_of(sglang_grid(tmp_path, runs=3, dp=4, tp=8))
    figure = ledger_figure(rows)
    assert grid_of(figure) == (6, 3)
    cells = {}
    for annotation in figure.layout.annotations:  # a panel's title sits over its column, at its row's top
        cells.setdefault(round(annotation.y, 3), []).append((round(annotation.x, 3), annotation.text))
    rows_drawn = [[text for _, text in sorted(cells[y])] for y in sorted(cells, reverse=True)]
    assert [[text.split("<br>")[1].split(" (")[0] for text in row] for row in rows_drawn] == [
        [f"DP{group} · run {run}" for group in groups] for run in (1, 2, 3) for groups in ((0, 1, 2), (3,))
    ]
