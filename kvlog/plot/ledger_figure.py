"""The ledger's picture: where each rank's device memory went, one stacked bar per rank, in small multiples.

A bar stacks what ``kvlog ledger`` states of a rank's run, from the bottom: each consumer of device
memory (``kvlog.ledger.CONSUMERS``, in its order), the KV memory committed, the free memory at the end
of start-up, and what no line accounts for. A consumer no line states is not drawn at all (it is no
0 GiB segment: the hover of the others says which are unknown). The KV pools' address space is an
upper bound, never memory: it is a hatched, outlined bar of its own beside the stack, rising from
where the KV memory starts, so that a reservation larger than the device stands out beyond it. A line
across the bar marks the device total (else the free memory before the load, the most the run could
hold); a red triangle above it marks a flagged rank, and every segment's hover says its figure, what
its printed rounding hides and the lines it rests on, and the rank's flags.

A panel is one server run of one data- (or pipeline-) parallel group: its tensor-parallel ranks side
by side. Panels fill a grid row by row, a run's groups next to each other when they fit, so that TP8
× DP × many runs reads as a grid, not a column. Every panel has the same memory axis, so that bars
compare across runs. Importing this module imports Plotly: ``kvlog.commands.plot`` imports it only
when it draws.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import PurePath
from typing import Any

from plotly import graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from kvlog.ledger import CONSUMERS, Figure, LedgerRow
from kvlog.plot.figure import COMMITTED, GIB, VA_BOUND
from kvlog.text.printable import printable_name
from kvlog.text.units import byte_figure

#: legend names of the segments and marks that are not consumers
FREE = "free (end of start-up)"
UNACCOUNTED = "unaccounted (total - the rest)"
TOTAL = "device total (else free before the load)"
FLAGGED = "flagged (hover for the flags)"
COMMITTED_COLOUR = "#1f77b4"
FREE_COLOUR = "#2ca02c"
UNACCOUNTED_COLOUR = "#ff9896"
VA_COLOUR = "#ff7f0e"
TOTAL_COLOUR = "#222222"
FLAG_COLOUR = "#d62728"
#: how far apart (the largest difference of a channel) two colours of the figure are at least
_APART = 40


def _distinct(candidates: Sequence[str], taken: Sequence[str]) -> tuple[str, ...]:
    """``candidates`` less each too close to one of ``taken`` or to one kept before it."""
    kept: list[str] = []
    for colour in candidates:
        channels = _channels(colour)
        if all(
            max(abs(a - b) for a, b in zip(channels, _channels(other), strict=True)) > _APART
            for other in [*taken, *kept]
        ):
            kept.append(colour)
    return tuple(kept)


def _channels(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


#: the consumers' colours, by their place in ``CONSUMERS`` (the weights grey, as on the timeline), then
#: Plotly's larger qualitative scales, so that the table may grow well past today's consumers
CONSUMER_COLOURS = _distinct(
    (
        "#7f7f7f",
        "#9467bd",
        "#8c564b",
        "#bcbd22",
        "#17becf",
        "#e377c2",
        "#aec7e8",
        "#c5b0d5",
        "#c49c94",
        "#dbdb8d",
        "#9edae5",
        "#393b79",
        *(colour.lower() for colour in (*qualitative.Dark24, *qualitative.Light24)),
    ),
    (COMMITTED_COLOUR, FREE_COLOUR, UNACCOUNTED_COLOUR, VA_COLOUR, TOTAL_COLOUR, FLAG_COLOUR, "#ffffff"),
)
#: where a rank's bars sit about its position (in rank slots): the stack, then the address space beside it
STACK_OFFSET, STACK_WIDTH = -0.40, 0.56
VA_OFFSET, VA_WIDTH = 0.20, 0.18
#: pixels: a rank's slot, a panel's axes and gaps, a grid row, the title and legend above
_SLOT = 46
_PANEL_PAD = 90
_LEAST_PANEL = 320
#: about what a character of a panel's title takes (13 px type)
_TITLE_CHAR = 7.5
_MAX_WIDTH = 1600
_LEAST_WIDTH = 700
_ROW_HEIGHT = 350
_TOP = 190
_BOTTOM = 40
_SIDES = 70
_RANK = re.compile(r"([A-Za-z]+)(\d+)")
#: the outer parallel dimensions: a panel is one server run of one group of them (sglang: ``DP1 PP0 TP3 EP3``)
_GROUPED = ("DP", "PP")


@dataclass(frozen=True)
class Panel:
    """One server run's ranks of one parallel group, drawn side by side: the rows, and what each bar is labelled."""

    title: str
    rows: tuple[LedgerRow, ...]
    labels: tuple[str, ...]


def ledger_figure(rows: Sequence[LedgerRow], title: str = "Where the device memory went") -> Any:
    """The figure of ``rows`` (``kvlog.ledger`` rows, with their flags): a ``plotly.graph_objects.Figure``."""
    panels = panels_of(rows)
    columns = _columns(panels)
    places = _places(panels, columns)
    grid = max((row for row, _ in places), default=1)
    width = max(_LEAST_WIDTH, columns * _panel_width(panels) + 2 * _SIDES)
    height = grid * _ROW_HEIGHT + _TOP + _BOTTOM
    figure = make_subplots(
        rows=grid,
        cols=columns,
        subplot_titles=_titles(panels, places, columns),
        horizontal_spacing=min(0.2, 60 / width) if columns > 1 else 0.0,
        vertical_spacing=min(0.3, 110 / height) if grid > 1 else 0.0,
    )
    figure.update_annotations(font_size=13)  # the panels' titles
    top = _top(rows)
    slots = (_panel_width(panels) - _PANEL_PAD) // _SLOT  # a rank's bar is as wide in every panel
    shown: set[str] = set()
    for panel, (row, col) in zip(panels, places, strict=True):
        at = {"row": row, "col": col}
        for trace in _traces(panel, top):
            trace.showlegend = trace.name not in shown
            shown.add(trace.name)
            figure.add_trace(trace, **at)
        figure.update_xaxes(
            tickvals=list(range(len(panel.rows))),
            ticktext=[escape(label) for label in panel.labels],
            range=[-0.5 - (slots - len(panel.rows)) / 2, len(panel.rows) - 0.5 + (slots - len(panel.rows)) / 2],
            showgrid=False,
            **at,
        )
        figure.update_yaxes(range=[0, top / GIB], title_text="device memory (GiB)" if at["col"] == 1 else None, **at)
    figure.update_layout(
        title={
            "text": escape(title),
            "subtitle": {
                "text": "a bar per rank: consumers, KV committed, free, unaccounted; hatched beside it: "
                "KV address space reserved, an upper bound that is not memory"
            },
            "yref": "container",
            "y": 1 - 15 / height,
            "yanchor": "top",
        },
        barmode="overlay",
        width=width,
        height=height,
        hovermode="closest",
        legend={"orientation": "h", "yref": "container", "y": 1 - 75 / height, "yanchor": "top", "x": 0},
        margin={"t": _TOP, "l": _SIDES, "r": _SIDES, "b": _BOTTOM},
        template="plotly_white",
    )
    return figure


def panels_of(rows: Sequence[LedgerRow]) -> list[Panel]:
    """The panels of ``rows``: per file and run (in the order met), per parallel group, the ranks in order.

    A rank's group is its outer parallel ranks, ``DP`` and ``PP``; the rest names its bar, ``TP`` first
    (``DP1 EP3 TP3``: group ``DP1``, bar ``TP3 EP3``). sglang's ``EP`` ranks subdivide its TP group: a
    panel each would be a bar each.
    """
    groups: dict[tuple[str, int, str], list[tuple[str, LedgerRow]]] = {}
    for row in rows:
        tags = row.ranks.split()
        outer = [tag for tag in tags if _kind(tag) in _GROUPED]
        inner = sorted((tag for tag in tags if tag not in outer), key=lambda tag: _kind(tag) != "TP")
        groups.setdefault((row.source, row.run, " ".join(outer)), []).append((" ".join(inner) or "no rank", row))
    files = list(dict.fromkeys(row.source for row in rows))
    keys = sorted(groups, key=lambda key: (files.index(key[0]), key[1], _order(key[2])))
    panels = []
    for source, run, group in keys:
        members = sorted(groups[(source, run, group)], key=lambda member: _order(member[0]))
        name = printable_name(PurePath(source).name)
        when = members[0][1].start.replace("T", " ")[:16]
        title = f"{name} · {group + ' · ' if group else ''}run {run} ({when})"
        labels = tuple(label + (" !" if row.flags else "") for label, row in members)
        panels.append(Panel(title, tuple(row for _, row in members), labels))
    return panels


def _kind(tag: str) -> str:
    """``TP`` of ``TP3``: what a rank tag counts."""
    match = _RANK.fullmatch(tag)
    return match[1].upper() if match else tag


def _order(ranks: str) -> tuple[tuple[str, int, str], ...]:
    """Ranks in their numeric order (TP2 before TP10); a tag of no number after, as written."""
    order = []
    for tag in ranks.split():
        match = _RANK.fullmatch(tag)
        order.append((match[1], int(match[2]), "") if match else ("~", 0, tag))
    return tuple(order)


def _panel_width(panels: Sequence[Panel]) -> int:
    """Pixels a panel takes: its ranks' slots, at least what its title's two lines need."""
    return max(max((len(panel.rows) for panel in panels), default=1) * _SLOT + _PANEL_PAD, _LEAST_PANEL)


def _heading(panel: Panel, width: int) -> str:
    """The panel's title on two lines, the file's name cut to the panel's width: ``name<br>DP0 · run 1 (...)``."""
    name, _, rest = panel.title.partition(" · ")
    fits = max(8, int((width - _PANEL_PAD / 2) / _TITLE_CHAR))
    name = name if len(name) <= fits else name[: fits - 1] + "…"
    return f"{escape(name)}<br>{escape(rest)}"


def _columns(panels: Sequence[Panel]) -> int:
    """As many panels a grid row as fit, whole runs at a time where a run's groups fit in one row."""
    if not panels:
        return 1
    fit = max(1, min(len(panels), (_MAX_WIDTH - 2 * _SIDES) // _panel_width(panels)))
    per_run = max(len(members) for members in _runs(panels).values())
    return per_run * (fit // per_run) if per_run <= fit else fit


def _runs(panels: Sequence[Panel]) -> dict[tuple[str, int], list[int]]:
    """The panels of each server run (one file, one run number), by index, in order."""
    runs: dict[tuple[str, int], list[int]] = {}
    for index, panel in enumerate(panels):
        runs.setdefault((panel.rows[0].source, panel.rows[0].run), []).append(index)
    return runs


def _places(panels: Sequence[Panel], columns: int) -> list[tuple[int, int]]:
    """Each panel's grid row and column (from 1): in order, a run that takes more than a row starting one.

    A run whose groups fit in a row never straddles two (the columns are a multiple of its groups); one
    of more groups than a row holds starts a row of its own, so that DP0 is always in the first column.
    """
    places: list[tuple[int, int]] = []
    at = 0  # the next free cell, row-major
    for members in _runs(panels).values():
        if len(members) > columns and at % columns:
            at += columns - at % columns
        for _ in members:
            places.append((at // columns + 1, at % columns + 1))
            at += 1
    return places


def _titles(panels: Sequence[Panel], places: list[tuple[int, int]], columns: int) -> list[str]:
    """``make_subplots``' titles, cell by cell (row-major): an empty cell's is empty."""
    cells = [""] * (max((row for row, _ in places), default=1) * columns)
    width = _panel_width(panels)  # every panel's: worked out once, not once a panel over all of them
    for panel, (row, col) in zip(panels, places, strict=True):
        cells[(row - 1) * columns + col - 1] = _heading(panel, width)
    return cells


@dataclass(frozen=True)
class _Segment:
    name: str
    colour: str
    figures: tuple[Figure, ...]


def _segments(panel: Panel) -> list[_Segment]:
    """The stack's layers, bottom up: each consumer some rank of the panel states, KV, free, unaccounted."""
    names = list(dict.fromkeys([*CONSUMERS, *(name for row in panel.rows for name, _ in row.consumers)]))
    layers = [
        _Segment(
            name.replace("_", " "),
            CONSUMER_COLOURS[names.index(name) % len(CONSUMER_COLOURS)],
            tuple(dict(row.consumers).get(name, Figure(None)) for row in panel.rows),
        )
        for name in names
    ]
    layers.append(_Segment(COMMITTED, COMMITTED_COLOUR, tuple(row.kv_committed for row in panel.rows)))
    layers.append(_Segment(FREE, FREE_COLOUR, tuple(row.free for row in panel.rows)))
    # unaccounted below 0 (the figures add to more than the total) is no memory to stack: the total's line shows it
    over = tuple(
        row.unaccounted if (row.unaccounted.value or 0) >= 0 else Figure(None, row.unaccounted.uncertainty)
        for row in panel.rows
    )
    layers.append(_Segment(UNACCOUNTED, UNACCOUNTED_COLOUR, over))
    return [layer for layer in layers if any(figure.known for figure in layer.figures)]


def _traces(panel: Panel, top: int) -> list[Any]:
    positions = list(range(len(panel.rows)))
    heads = [_rank_head(panel, index) for index in positions]
    base = [0] * len(panel.rows)
    # the KV memory stands on the consumers, whether or not a rank of the panel states any KV memory
    kv_base = [sum(figure.value or 0 for _, figure in row.consumers) for row in panel.rows]
    traces = []
    for layer in _segments(panel):
        traces.append(
            go.Bar(
                name=layer.name,
                legendgroup=layer.name,
                x=positions,
                y=[None if figure.value is None else figure.value / GIB for figure in layer.figures],
                base=[value / GIB for value in base],
                offset=STACK_OFFSET,
                width=STACK_WIDTH,
                marker={"color": layer.colour, "line": {"color": "#ffffff", "width": 0.5}},
                error_y=_rounding(layer) if layer.name == UNACCOUNTED else None,
                hovertext=[_hover(head, layer.name, figure) for head, figure in zip(heads, layer.figures, strict=True)],
                hoverinfo="text",
            )
        )
        base = [value + (figure.value or 0) for value, figure in zip(base, layer.figures, strict=True)]
    bounds = [row.kv_va_upper_bound for row in panel.rows]
    if any(bound.known for bound in bounds):
        traces.append(
            go.Bar(
                name=VA_BOUND,
                legendgroup=VA_BOUND,
                x=positions,
                y=[None if bound.value is None else bound.value / GIB for bound in bounds],
                base=[value / GIB for value in kv_base],
                offset=VA_OFFSET,
                width=VA_WIDTH,
                marker={
                    "color": "rgba(255,127,14,0.08)",
                    "line": {"color": VA_COLOUR, "width": 2},
                    "pattern": {"shape": "/", "fgcolor": VA_COLOUR, "fgopacity": 1, "solidity": 0.3},
                },
                hovertext=[_hover(head, VA_BOUND, bound) for head, bound in zip(heads, bounds, strict=True)],
                hoverinfo="text",
            )
        )
    traces.extend(_marks(panel, heads, base, top))
    return traces


def _marks(panel: Panel, heads: list[str], stacked: list[int], top: int) -> list[Any]:
    """The device total's line across each bar, and a triangle over each flagged rank."""
    traces = []
    x: list[float | None] = []
    y: list[float | None] = []
    hover: list[str | None] = []
    for index, (row, head) in enumerate(zip(panel.rows, heads, strict=True)):
        ceiling = row.device_total if row.device_total.known else row.ceiling
        if ceiling.value is None:
            continue
        said = "device total" if row.device_total.known else "free before the load (no line states the total)"
        text = _hover(head, said, ceiling)
        x += [index + STACK_OFFSET, index + STACK_OFFSET + STACK_WIDTH, None]
        y += [ceiling.value / GIB, ceiling.value / GIB, None]
        hover += [text, text, None]
    if x:
        traces.append(
            go.Scatter(
                name=TOTAL,
                legendgroup=TOTAL,
                x=x,
                y=y,
                mode="lines",
                line={"color": TOTAL_COLOUR, "width": 3},
                hovertext=hover,
                hoverinfo="text",
            )
        )
    flagged = [index for index, row in enumerate(panel.rows) if row.flags]
    if flagged:
        traces.append(
            go.Scatter(
                name=FLAGGED,
                legendgroup=FLAGGED,
                x=[index + STACK_OFFSET + STACK_WIDTH / 2 for index in flagged],
                y=[_flag_height(panel.rows[index], stacked[index], top) / GIB for index in flagged],
                mode="markers",
                marker={"symbol": "triangle-down", "size": 13, "color": FLAG_COLOUR},
                hovertext=[heads[index] for index in flagged],
                hoverinfo="text",
            )
        )
    return traces


def _flag_height(row: LedgerRow, stacked: int, top: int) -> int:
    """Just above the highest thing drawn for the rank, inside the axis."""
    marks = [stacked, row.device_total.value or 0, row.ceiling.value or 0]
    return min(max(marks) + top // 25, top - top // 50)


def _top(rows: Sequence[LedgerRow]) -> int:
    """The memory axis' top, the same in every panel: above every bar, line and address-space outline."""
    highest = 0
    for row in rows:
        parts = [figure.value or 0 for _, figure in row.consumers]
        kv_base = sum(parts)
        stack = (
            kv_base
            + sum(figure.value or 0 for figure in (row.kv_committed, row.free) if figure.value is not None)
            + max(0, row.unaccounted.value or 0)
        )
        highest = max(
            highest,
            stack,
            kv_base + (row.kv_va_upper_bound.value or 0),
            row.device_total.value or 0,
            row.ceiling.value or 0,
        )
    return round(highest * 1.1) or 1 << 30


def _rounding(layer: _Segment) -> dict[str, Any]:
    """Unaccounted's range: every figure's rounding adds to it."""
    spans = [figure.uncertainty / GIB if figure.known else 0 for figure in layer.figures]
    return {"type": "data", "array": spans, "visible": True, "color": TOTAL_COLOUR, "thickness": 1.5, "width": 6}


def _rank_head(panel: Panel, index: int) -> str:
    """The first lines of each of the rank's hovers: the panel, the rank, what no line states, the flags."""
    row = panel.rows[index]
    unknown = [name.replace("_", " ") for name, figure in row.consumers if not figure.known]
    lines = [f"<b>{escape(panel.title)} · {escape(row.ranks or 'no rank')}</b>"]
    if unknown:
        lines.append(escape("no line states: " + ", ".join(unknown) + " (not drawn, not 0)"))
    if (row.unaccounted.value or 0) < 0:
        over = byte_figure(-(row.unaccounted.value or 0))
        lines.append(f"the figures add to {over} more than the total (± {byte_figure(row.unaccounted.uncertainty)})")
    lines.extend(f"<b>! {escape(flag)}</b>" for flag in row.flags)
    return "<br>".join(lines)


def _hover(head: str, name: str, figure: Figure) -> str:
    if figure.value is None:
        return head
    rounding = f" ± {byte_figure(figure.uncertainty)}" if figure.uncertainty else ""
    where = ", ".join(escape(printable_name(PurePath(at).name)) for at in figure.evidence)
    lines = [head, f"{escape(name)}: {figure.value / GIB:.2f} GiB{rounding}"]
    if where:
        lines.append(f"from {where}")
    return "<br>".join(lines)
