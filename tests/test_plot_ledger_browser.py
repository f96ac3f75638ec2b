"""``kvlog plot --view ledger`` as a real browser draws it: headless Chromium, offline, and its pixels.

The harness is the timeline's (``test_plot_browser``): the HTML is loaded from a file:// URL with the
network cut and its console must stay silent, the PNG is Chromium's too (through Kaleido). The pixels of
both are checked where the figure's axes put each bar: every segment of a stack is painted in its
colour, bottom up, at the height its figure says; a consumer no line states paints nothing; the KV
address space is hatched beside the stack and rises above the device total; the total is a line across
each bar; a flagged rank, and only it, wears the red triangle; no panel paints another's series.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_ledger import current, own_events
from test_plot_browser import chromium, console, drawn, headless, painted, png_size, screen_and_png

from kvlog import commands
from kvlog.ledger import CONSUMERS, LedgerRow
from kvlog.plot import figure as timeline_names
from kvlog.plot import ledger_figure as names
from kvlog.plot.ledger_figure import STACK_OFFSET, STACK_WIDTH, VA_OFFSET, VA_WIDTH, ledger_figure, panels_of

#: the timeline's fixture, used here by name: Chromium, or a skip where none is installed (on CI, a failure)
__all__ = ["chromium"]

GIB = 1 << 30
POOL = {"layout": "mha", "allocation_state": "allocated"}
#: large segments, so that each is many pixels tall: rank 0 every figure (unaccounted 8 GiB), rank 1 no
#: weights (unaccounted 28 GiB), rank 2 rank 0's figures but a pool of 120 GiB of address space, 32
#: committed, on an 80 GiB device
THRESHOLD = 10 * GIB  # rank 0's 8 GiB unaccounted is not flagged, rank 1's 28 GiB is
RANKS: dict[int, list[str]] = {
    0: [
        current("weights.load_end", mem_usage_bytes=20 * GIB),
        current("cuda_graph.captured", mem_usage_bytes=8 * GIB),
        current("kv_pool.allocation", k_bytes=16 * GIB, v_bytes=16 * GIB, **POOL),
        current("kv_memory.pool_end", avail_bytes=12 * GIB),
    ],
    1: [
        current("cuda_graph.captured", mem_usage_bytes=8 * GIB),
        current("kv_pool.allocation", k_bytes=16 * GIB, v_bytes=16 * GIB, **POOL),
        current("kv_memory.pool_end", avail_bytes=12 * GIB),
    ],
    2: [
        current("weights.load_end", mem_usage_bytes=20 * GIB),
        current("cuda_graph.captured", mem_usage_bytes=8 * GIB),
        current(
            "kv_pool.allocation",
            layout="mha",
            k_bytes=60 * GIB,
            v_bytes=60 * GIB,
            allocation_state="va_upper_bound",
            committed_bytes=32 * GIB,
        ),
        current("kv_memory.pool_end", avail_bytes=12 * GIB),
    ],
}
BUDGET = current("memory.profile_budget", total_bytes=80 * GIB, gpu_memory_utilization=0.9, budget_bytes=72 * GIB)
#: how far a pixel may be from a colour (an edge's blending, the PNG's encoding)
NEAR = 12


@dataclass(frozen=True)
class Drawn:
    figure: Any
    rows: tuple[LedgerRow, ...]
    pixels: dict[str, Any]
    html: Path


def tp8_by_dp2(folder: Path) -> Path:
    """Two runs of an sglang TP8 x DP2 start-up, DP1 TP5 with less free memory (flagged: ranks differ)."""
    lines = []
    for run in range(2):
        for group in range(2):
            for rank in range(8):
                at = f"[2026-07-{run + 1:02} 09:00:{10 + rank:02} DP{group} TP{rank}]"
                free = "12.40" if (group, rank) == (1, 5) else "18.80"
                lines += [
                    f"{at} Load weight begin. avail mem=139.06 GB",
                    f"{at} Load weight end. type=LlamaForCausalLM, avail mem=72.91 GB, mem usage=66.15 GB.",
                    f"{at} KV Cache is allocated. #tokens: 1703936, K size: 20.00 GB, V size: 20.00 GB",
                    f"{at} Memory pool end. avail mem={free} GB",
                ]
    path = folder / "tp8dp2.log"
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def ledger_drawn(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Drawn:
    folder = tmp_path_factory.mktemp("ledger")
    lines = [line.replace('"tp": 0', f'"tp": {rank}') for rank, events in RANKS.items() for line in [BUDGET, *events]]
    inputs = [own_events(folder, *lines), tp8_by_dp2(folder)]
    rows = commands.ledger([str(path) for path in inputs], stdout=io.BytesIO(), unaccounted_threshold=THRESHOLD).rows
    figure = ledger_figure(rows)
    html, png = folder / "ledger.html", folder / "ledger.png"
    for out in (html, png):
        drawn = commands.plot(inputs, output=out, view="ledger", unaccounted_threshold=THRESHOLD)
        assert drawn.exit_status == commands.EXIT_OK
    assert png_size(png.read_bytes()) == (figure.layout.width, figure.layout.height)
    return Drawn(figure, rows, screen_and_png(chromium, figure, html, png, folder), html)


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def near(seen: tuple[int, int, int], colour: str) -> bool:
    return max(abs(a - b) for a, b in zip(seen, rgb(colour), strict=True)) <= NEAR


@dataclass(frozen=True)
class Axes:
    """A panel's axes mapped to the image's pixels."""

    figure: Any
    axis: str  # "" for the first panel, else its number

    def _ranges(self) -> tuple[Any, Any]:
        layout = self.figure.layout
        return layout[f"xaxis{self.axis}"], layout[f"yaxis{self.axis}"]

    def x(self, value: float) -> int:
        layout, (x, _) = self.figure.layout, self._ranges()
        inner = layout.width - layout.margin.l - layout.margin.r
        left, right = (layout.margin.l + end * inner for end in x.domain)
        return round(left + (value - x.range[0]) / (x.range[1] - x.range[0]) * (right - left))

    def y(self, gib: float) -> int:
        layout, (_, y) = self.figure.layout, self._ranges()
        inner = layout.height - layout.margin.t - layout.margin.b
        top, bottom = (layout.margin.t + (1 - end) * inner for end in reversed(y.domain))
        return round(bottom - (gib - y.range[0]) / (y.range[1] - y.range[0]) * (bottom - top))

    def box(self) -> tuple[int, int, int, int]:
        x, y = self._ranges()
        return self.x(x.range[0]), self.y(y.range[1]), self.x(x.range[1]), self.y(y.range[0])


def column(image: Any, axes: Axes, position: float) -> list[tuple[int, int, int]]:
    """The pixels of the vertical line through ``position`` (in rank slots), top to bottom of the panel."""
    _, top, _, bottom = axes.box()
    at = axes.x(position)
    return [image.getpixel((at, row)) for row in range(top, bottom)]


def colour_of(trace: Any) -> str:
    if trace.type == "bar":
        return str(trace.marker.line.color if trace.name == timeline_names.VA_BOUND else trace.marker.color)
    return str(trace.marker.color if trace.mode == "markers" else trace.line.color)


MEDIA = pytest.mark.parametrize("medium", ["html", "png"])
STACK = STACK_OFFSET + STACK_WIDTH / 2
BESIDE = VA_OFFSET + VA_WIDTH / 2


@MEDIA
def test_each_segment_is_painted_in_its_colour_at_its_figure_s_height(ledger_drawn: Drawn, medium: str) -> None:
    figure, image = ledger_drawn.figure, ledger_drawn.pixels[medium]
    axes = Axes(figure, "")
    at = axes.x(STACK)
    for trace in figure.data:
        if trace.type != "bar" or trace.xaxis != "x" or trace.name == timeline_names.VA_BOUND:
            continue
        for position, (base, height) in enumerate(zip(trace.base, trace.y, strict=True)):
            if height is None:
                continue
            middle = axes.y(base + height / 2)
            seen = image.getpixel((axes.x(position + STACK), middle))
            assert near(seen, trace.marker.color), f"{medium}: {trace.name} of rank {position} is {seen} at {middle}"
    # rank 0, bottom up: weights, CUDA graphs, KV, free, unaccounted, up to the 80 GiB total's line
    assert near(image.getpixel((at, axes.y(10))), names.CONSUMER_COLOURS[0])
    assert near(image.getpixel((at, axes.y(76))), names.UNACCOUNTED_COLOUR)
    line = [image.getpixel((at, row)) for row in range(axes.y(80) - 2, axes.y(80) + 3)]
    assert any(near(seen, names.TOTAL_COLOUR) for seen in line)
    assert not any(near(seen, names.TOTAL_COLOUR) for seen in column(image, axes, STACK)[: axes.y(84) - axes.box()[1]])


@MEDIA
def test_a_consumer_no_line_states_paints_nothing(ledger_drawn: Drawn, medium: str) -> None:
    """Rank 1 states no weights: its stack has no grey, and starts with its CUDA graphs at 0 GiB."""
    figure, image = ledger_drawn.figure, ledger_drawn.pixels[medium]
    axes = Axes(figure, "")
    assert not any(near(seen, names.CONSUMER_COLOURS[0]) for seen in column(image, axes, 1 + STACK))
    assert sum(near(seen, names.CONSUMER_COLOURS[0]) for seen in column(image, axes, STACK)) >= 20
    cuda_graph = names.CONSUMER_COLOURS[CONSUMERS.index("cuda_graph")]  # in the table's order
    assert near(image.getpixel((axes.x(1 + STACK), axes.y(4))), cuda_graph)


@MEDIA
def test_the_kv_address_space_is_hatched_beside_the_stack_and_rises_above_the_device(
    ledger_drawn: Drawn, medium: str
) -> None:
    figure, image = ledger_drawn.figure, ledger_drawn.pixels[medium]
    axes = Axes(figure, "")
    beside = column(image, axes, 2 + BESIDE)
    _, top, _, _ = axes.box()
    above = beside[axes.y(140) - top : axes.y(84) - top]  # from 84 GiB up to the outline's top, 148 GiB
    assert sum(near(seen, names.VA_COLOUR) for seen in above) >= 5, "the hatching rises above the 80 GiB device"
    assert sum(not near(seen, names.VA_COLOUR) for seen in above) >= 5, "hatched, not filled: gaps between strokes"
    assert not any(near(seen, names.VA_COLOUR) for seen in column(image, axes, 2 + STACK))  # never in the stack
    assert not any(near(seen, names.VA_COLOUR) for seen in column(image, axes, BESIDE))  # rank 0 reserved none
    # the outline's foot is where the KV memory starts: above the weights and CUDA graphs (28 GiB)
    assert not any(near(seen, names.VA_COLOUR) for seen in beside[axes.y(24) - top :])


@MEDIA
def test_only_flagged_ranks_wear_the_red_triangle(ledger_drawn: Drawn, medium: str) -> None:
    figure, image = ledger_drawn.figure, ledger_drawn.pixels[medium]
    flagged = [bool(row.flags) for row in panels_of(ledger_drawn.rows)[0].rows]
    assert flagged == [False, True, True]  # 8 GiB unaccounted; 28 GiB (no weights); the KV bound above the device
    axes = Axes(figure, "")
    for position in range(3):
        red = sum(near(seen, names.FLAG_COLOUR) for seen in column(image, axes, position + STACK))
        assert (red >= 3) is flagged[position], (medium, position)


@MEDIA
def test_every_panel_paints_its_own_series_and_no_other(ledger_drawn: Drawn, medium: str) -> None:
    figure, image = ledger_drawn.figure, ledger_drawn.pixels[medium]
    axes_names = sorted({trace.xaxis for trace in figure.data})
    assert len(axes_names) == 1 + 4  # the three ranks' panel, and TP8 x DP2 x 2 runs
    everyone = {colour_of(trace) for trace in figure.data}
    for name in axes_names:
        axes = Axes(figure, name[1:])
        area = image.crop(axes.box())
        colours = area.getcolors(area.width * area.height)
        own = {colour_of(trace) for trace in figure.data if trace.xaxis == name}
        for colour in own:
            assert painted(colours, rgb(colour)) >= 8, f"{medium}: panel {name} does not show {colour}"
        for colour in everyone - own:
            assert painted(colours, rgb(colour)) <= 2, f"{medium}: panel {name} shows another's {colour}"


def test_the_html_draws_offline_with_its_legend_and_hatching(
    chromium: str, ledger_drawn: Drawn, tmp_path: Path
) -> None:
    result = headless(chromium, ledger_drawn.html.as_uri(), "--dump-dom", profile=tmp_path / "profile")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = drawn(result.stdout)
    figure = ledger_drawn.figure
    assert dom.count("trace", "bars") == sum(1 for trace in figure.data if trace.type == "bar")
    assert sorted(dom.legend) == sorted({trace.name for trace in figure.data})
    assert "pattern" in dom.tags  # the address space is hatched
    assert console(result.stderr) == []
