"""The memory figure: one panel per server run and rank, drawn with Plotly (the ``plot`` extra).

Device memory is stacked from the bottom: the weights, then the KV memory committed, then the KV
pools' address space that is not committed, hatched and outlined with a dashed line, since it is an
upper bound that costs no memory and must not read as used memory. Free device memory, as each event
measured it, is a line of its own. Host pools are pinned host memory, not device memory: they have
their own axis, on the right. A value whose state or committed size the migration inferred wears an
open diamond, and hovering over it shows the rule, the evidence and the line it rests on. A run whose
usage lines were read (``--usage``) gets a second panel below, the KV cache's occupancy over time (the
share of its slots in use, not memory); a run of usage lines alone gets only that one.

Importing this module imports Plotly: ``kvlog.commands.plot`` imports it only when it draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from html import escape
from typing import Any

from plotly import graph_objects as go
from plotly.subplots import make_subplots

from kvlog.plot.timeline import VA, Sample, Timeline
from kvlog.text.units import BYTES, byte_figure

GIB = float(1 << 30)
#: legend names, which also name the traces
FREE = "free device memory"
WEIGHTS = "weights"
COMMITTED = "KV cache committed (memory)"
VA_BOUND = "KV VA upper bound (address space, not memory)"
HOST = "host KV pools (host memory, right axis)"
INFERRED = "inferred state (hover for the evidence)"
USAGE = "KV cache in use (share of its slots)"
SWA_USAGE = "sliding-window KV pool in use"
_ROW_HEIGHT = 300
_WIDTH = 1100
_TOP = 170
_LEAST_TAIL = timedelta(seconds=2)


def memory_figure(runs: Sequence[Timeline], title: str = "KV-cache memory over time") -> Any:
    """The figure of ``runs`` (a ``plotly.graph_objects.Figure``), one panel per run, in order.

    Each panel has the axes of what its run drew, and no other: the device axis (left) when it drew
    device memory, the host axis (right) when it drew host pools, overlaid only when it drew both.
    plotly.js draws an overlaying axis whose base axis holds no trace over another panel, with that
    panel's time axis, so a run of host pools alone gets its host axis as its only one.
    """
    # each run's memory panel, then its occupancy panel: (run, traces, whether it is the occupancy's)
    panels = [
        (run, traces, occupancy)
        for run in runs
        for traces, occupancy in (
            *(((_traces(run), False),) if run.has_memory else ()),
            *(((_usage_traces(run), True),) if run.has_usage else ()),
        )
    ]
    rows = len(panels)
    both = [not occupancy and _draws_device(panel) and run.has_host for run, panel, occupancy in panels]
    figure = make_subplots(
        rows=rows,
        cols=1,
        specs=[[{"secondary_y": overlaid}] for overlaid in both],
        subplot_titles=[
            escape(run.title + (" · KV cache in use" if occupancy else "")) for run, _, occupancy in panels
        ],
        vertical_spacing=min(0.12, 0.45 / rows),
    )
    shown: set[str] = set()
    for row, ((run, panel, occupancy), overlaid) in enumerate(zip(panels, both, strict=True), start=1):
        for trace, host in panel:
            trace.showlegend = trace.name not in shown
            shown.add(trace.name)
            figure.add_trace(trace, row=row, col=1, secondary_y=host and overlaid)
        if occupancy:
            figure.update_yaxes(title_text="KV cache in use (%)", range=[0, 100], row=row, col=1)
            continue
        if _draws_device(panel):
            figure.update_yaxes(title_text="device memory (GiB)", rangemode="tozero", row=row, col=1)
        if run.has_host:
            figure.update_yaxes(
                title_text="host memory (GiB)",
                rangemode="tozero",
                side="right",
                showgrid=not overlaid,
                row=row,
                col=1,
                secondary_y=overlaid,
            )
    figure.update_xaxes(type="date")
    height = _ROW_HEIGHT * rows + _TOP + 40
    figure.update_layout(
        title={
            "text": escape(title),
            "subtitle": {"text": "hatched: address space reserved for KV pools, an upper bound that is not memory"},
            "yref": "container",
            "y": 1 - 15 / height,
            "yanchor": "top",
        },
        width=_WIDTH,
        height=height,
        hovermode="closest",
        legend={"orientation": "h", "yref": "container", "y": 1 - 75 / height, "yanchor": "top", "x": 0},
        margin={"t": _TOP, "l": 70, "r": 70, "b": 40},
        template="plotly_white",
    )
    return figure


def _draws_device(panel: Sequence[tuple[Any, bool]]) -> bool:
    return any(not host for _, host in panel)


def _traces(run: Timeline) -> list[tuple[Any, bool]]:
    """The traces of one panel, in drawing order, each with whether it is host memory (drawn on the host axis).

    Each stacked area fills down to the one before it. A panel always has a trace: a run whose events
    changed nothing drawn (an arena closed, a pool slept freeing nothing) shows its committed memory, 0.
    """
    # the state after the last event holds on: drawn a little past it, so that the last step shows
    samples = (*run.samples, run.samples[-1])
    span = run.samples[-1].time - run.samples[0].time
    times = [sample.time for sample in run.samples] + [run.samples[-1].time + max(span / 25, _LEAST_TAIL)]
    hover = [_hover(sample) for sample in samples]
    weights = [sample.weights or 0 for sample in samples]  # unknown weights: the stack starts at 0, the hover says
    committed = [w + sample.kv_committed for w, sample in zip(weights, samples, strict=True)]
    bound = [c + sample.kv_va_bound for c, sample in zip(committed, samples, strict=True)]
    traces: list[tuple[Any, bool]] = []
    fill = "tozeroy"
    for name, base, top, style in (
        (WEIGHTS, [0] * len(samples), weights, _WEIGHTS_STYLE),
        (COMMITTED, weights, committed, _COMMITTED_STYLE),
        (VA_BOUND, committed, bound, _VA_STYLE),
    ):
        if top == base:
            continue  # a layer empty all run long: no trace to hover over
        traces.append((_step(name, times, top, hover, fill=fill, **style), False))
        fill = "tonexty"
    measured = [sample for sample in run.samples if sample.free is not None]
    if measured:
        free = [sample.free or 0 for sample in measured]
        traces.append(
            (
                _step(
                    FREE,
                    [sample.time for sample in measured],
                    free,
                    [_hover(sample) for sample in measured],
                    mode="lines+markers",
                    line={"color": "#2ca02c", "width": 2.5},
                    marker={"size": 6},
                ),
                False,
            )
        )
    if run.has_host:
        line = {"color": "#9467bd", "dash": "dot", "width": 2.5}
        host = [sample.host for sample in samples]
        traces.append(
            (_step(HOST, times, host, hover, mode="lines+markers", line=line, marker={"symbol": "square"}), True)
        )
    # an inferred VA upper bound is marked atop the band, an inferred allocation atop committed memory
    tops = [b if sample.state == VA else c for sample, c, b in zip(samples, committed, bound, strict=True)]
    marked = [(sample, top) for sample, top in zip(run.samples, tops, strict=False) if sample.inferred]
    if marked:
        traces.append(
            (
                go.Scatter(
                    name=INFERRED,
                    legendgroup=INFERRED,
                    x=[sample.time for sample, _ in marked],
                    y=[top / GIB for _, top in marked],
                    mode="markers",
                    marker={"symbol": "diamond-open", "size": 13, "color": "#d62728", "line": {"width": 2.5}},
                    hovertext=[_hover(sample) for sample, _ in marked],
                    hoverinfo="text",
                ),
                False,
            )
        )
    if not traces:
        traces.append((_step(COMMITTED, times, committed, hover, fill="tozeroy", **_COMMITTED_STYLE), False))
    return traces


def _usage_traces(run: Timeline) -> list[tuple[Any, bool]]:
    """The occupancy panel: each usage line's share of the pool in use, held until the next (a percentage)."""
    traces: list[tuple[Any, bool]] = []
    read = [sample for sample in run.samples if sample.event == "kv_pool.usage"]
    for name, share, color in ((USAGE, "usage", "#8c564b"), (SWA_USAGE, "swa_usage", "#e377c2")):
        points = [(sample, getattr(sample, share)) for sample in read if getattr(sample, share) is not None]
        if not points:
            continue
        traces.append(
            (
                go.Scatter(
                    name=name,
                    legendgroup=name,
                    x=[sample.time for sample, _ in points],
                    y=[value * 100 for _, value in points],
                    mode="lines+markers",
                    line_shape="hv",
                    line={"color": color, "width": 2},
                    marker={"size": 4},
                    hovertext=[_hover(sample) for sample, _ in points],
                    hoverinfo="text+name",
                ),
                False,
            )
        )
    return traces


_WEIGHTS_STYLE: dict[str, Any] = {"line": {"color": "#7f7f7f"}, "fillcolor": "rgba(127,127,127,0.35)"}
_COMMITTED_STYLE: dict[str, Any] = {"line": {"color": "#1f77b4"}, "fillcolor": "rgba(31,119,180,0.55)"}
_VA_STYLE: dict[str, Any] = {
    "line": {"color": "#ff7f0e", "dash": "dash", "width": 2},
    "fillcolor": "rgba(255,255,255,0)",
    "fillpattern": {"shape": "/", "fgcolor": "#ff7f0e", "bgcolor": "rgba(255,127,14,0.08)", "solidity": 0.35},
}


def _step(name: str, times: Sequence[Any], values: Sequence[int], hover: Sequence[str], **style: Any) -> Any:
    style.setdefault("mode", "lines")
    return go.Scatter(
        name=name,
        legendgroup=name,
        x=list(times),
        y=[value / GIB for value in values],
        line_shape="hv",
        hovertext=list(hover),
        hoverinfo="text+name",
        **style,
    )


def _hover(sample: Sample) -> str:
    """The sample in words: the event, what it says, the state it leaves, each inference and its evidence."""
    lines = [f"<b>{escape(sample.event)}</b> at {escape(sample.at)}", escape(sample.says)]
    state = (
        f"weights {byte_figure(sample.weights, inferred=sample.weights_inferred)}"
        f" · KV committed {BYTES.format(sample.kv_committed)}"
        f" · KV VA upper bound {BYTES.format(sample.kv_va_bound)} (not memory)"
    )
    lines.append(state)
    if sample.host:
        lines.append(f"host KV pools {BYTES.format(sample.host)} (host memory)")
    for inference in sample.inferred:
        lines.append(
            f"<b>{escape(inference.field)} inferred</b>, rule {escape(inference.rule)}: {escape(inference.evidence)}"
        )
        if inference.evidence_at is not None:
            said = f": {escape(inference.evidence_original)}" if inference.evidence_original else ""
            lines.append(f"evidence line {escape(inference.evidence_at)}{said}")
    if sample.original is not None:
        lines.append(f"original line: {escape(sample.original)}")
    return "<br>".join(lines)
