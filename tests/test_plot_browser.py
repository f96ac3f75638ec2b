"""``kvlog plot``'s figure drawn by a real browser: headless Chromium, with no network.

The HTML must draw where operators open it, often on a machine with no way out: Chromium loads it
from a file:// URL with every host unresolvable and every request sent to a closed proxy, and the
drawn DOM (Plotly's SVG, its traces, the legend) and the console (silent) are checked. A control
proves the harness would notice: the same figure with plotly.js from the CDN does not draw. A
screenshot is kept as a CI artifact (``$KVLOG_ARTIFACTS/memory.png``, default ``build/artifacts``).
PNG and SVG are rendered by Chromium too (through Kaleido), so they are tested here. Every subset of
the kinds of memory events is drawn as a run of its own, in one figure, and the pixels of the HTML's
screenshot and of the PNG show each panel painting its own series and no other run's.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from plot_helpers import HYBRID, POSTCAPTURE, kvlog_plot, runs_of

from kvlog import commands
from kvlog.commands._plot import plot
from kvlog.plot import figure as names
from kvlog.plot.figure import memory_figure

ROOT = Path(__file__).resolve().parent.parent
LEGEND = [names.WEIGHTS, names.COMMITTED, names.VA_BOUND, names.FREE, names.INFERRED, names.HOST]
#: no network: no name resolves, and whatever is requested goes to a closed port
OFFLINE = [
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]
CONSOLE = re.compile(r"CONSOLE[(:].*|Uncaught.*")


@pytest.fixture(scope="module")
def chromium() -> str:
    found = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed, and CI must prove the figure draws (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plot") / "memory.html"
    result = kvlog_plot(POSTCAPTURE, HYBRID, "-o", out)
    assert result.returncode == commands.EXIT_OK, result.stderr
    return out


def headless(chromium: str, url: str, *options: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Chromium, headless and offline, on ``url``; its console goes to standard error."""
    command = [
        chromium,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        *OFFLINE,
        *options,
        url,
    ]
    if os.geteuid() == 0:  # Chromium's sandbox refuses root
        command.insert(1, "--no-sandbox")
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=180)


class _Drawn(HTMLParser):
    """What Plotly drew: its SVG roots, its traces and the legend's texts."""

    def __init__(self) -> None:
        super().__init__()
        self.classes: list[set[str]] = []
        self.tags: list[str] = []
        self.legend: list[str] = []
        self._in_legend = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        self.classes.append(classes)
        self.tags.append(tag)
        self._in_legend = tag == "text" and "legendtext" in classes

    def handle_data(self, data: str) -> None:
        if self._in_legend:
            self.legend.append(data)
            self._in_legend = False

    def count(self, *wanted: str) -> int:
        return sum(1 for classes in self.classes if set(wanted) <= classes)


def drawn(dom: str) -> _Drawn:
    parser = _Drawn()
    parser.feed(dom)
    return parser


def console(stderr: str) -> list[str]:
    return [match.group(0) for match in CONSOLE.finditer(stderr)]


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """A fresh browser profile per test: nothing carried over, no clash with a running Chromium."""
    return tmp_path / "profile"


def test_the_html_draws_offline_with_a_silent_console(chromium: str, page: Path, profile: Path) -> None:
    result = headless(chromium, page.as_uri(), "--dump-dom", profile=profile)
    assert result.returncode == 0, result.stderr[-2000:]
    figure = drawn(result.stdout)
    assert figure.count("main-svg") >= 2  # the plot and its hover layer
    assert figure.count("trace", "scatter") == len(memory_figure(runs_of(POSTCAPTURE, HYBRID)).data)
    assert sorted(figure.legend) == sorted(LEGEND)
    assert "pattern" in figure.tags  # the VA band is hatched, not filled like memory
    assert console(result.stderr) == []


def test_a_figure_that_needs_the_network_does_not_draw_here(chromium: str, tmp_path: Path, profile: Path) -> None:
    """The control: plotly.js from the CDN cannot load offline, and the harness sees it."""
    cdn = tmp_path / "cdn.html"
    memory_figure(runs_of(HYBRID)).write_html(cdn, include_plotlyjs="cdn")
    result = headless(chromium, cdn.as_uri(), "--dump-dom", profile=profile)
    assert drawn(result.stdout).count("main-svg") == 0
    assert any("Plotly is not defined" in line for line in console(result.stderr))


def test_a_screenshot_is_kept_as_an_artifact(chromium: str, page: Path, profile: Path) -> None:
    artifacts = Path(os.environ.get("KVLOG_ARTIFACTS", ROOT / "build" / "artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "memory.png"
    shot.unlink(missing_ok=True)
    result = headless(chromium, page.as_uri(), f"--screenshot={shot}", "--window-size=1120,2660", profile=profile)
    assert result.returncode == 0, result.stderr[-2000:]
    assert png_size(shot.read_bytes()) == (1120, 2660)
    assert console(result.stderr) == []


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.usefixtures("chromium")
def test_png_and_svg_are_rendered_as_the_figure_is_laid_out(tmp_path: Path) -> None:
    layout = memory_figure(runs_of(POSTCAPTURE, HYBRID)).layout
    png, svg = tmp_path / "memory.png", tmp_path / "memory.svg"
    for out in (png, svg):
        result = kvlog_plot(POSTCAPTURE, HYBRID, "-o", out, process=True)
        assert result.returncode == commands.EXIT_OK, result.stderr
        assert result.stderr == f"kvlog plot: 46 event(s), 8 run(s) drawn to {out}\n"  # the browser stays quiet
    assert png_size(png.read_bytes()) == (layout.width, layout.height)
    text = svg.read_text()
    assert text.startswith("<svg") and 'class="main-svg"' in text and "<pattern" in text  # the hatching
    assert all(f">{name}<" in text for name in LEGEND)


def test_an_image_without_a_browser_says_what_to_install(tmp_path: Path) -> None:
    out = tmp_path / "memory.png"
    env = {**os.environ, "BROWSER_PATH": str(tmp_path / "no-chromium")}
    result = kvlog_plot(HYBRID, "-o", out, env=env, process=True)
    assert result.returncode == commands.EXIT_ERROR
    assert result.stderr.startswith(f"kvlog plot: {out}: kvlog plot renders PNG with Chrome or Chromium, and none was")
    assert "apt-get install chromium" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


# -- every subset of event kinds, each run in a panel of its own, as the browser drew it --------------------

#: one rank's lines of each kind of memory event (a weights load also measures free memory)
KINDS = {
    "weights": [
        "Load weight begin. avail mem=139.06 GB",
        "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=72.91 GB, mem usage=66.15 GB.",
    ],
    "kv": ["KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1703936, K size: 20.00 GB, V size: 20.00 GB"],
    "va": ["KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1523712, K size: 25.00 GB, V size: 25.00 GB"],
    "host": ["Allocating full hierarchical KV host pool: 2652800 tokens, 21.73 GB host memory."],
    "free": ["Memory pool end. avail mem=18.80 GB"],
}
#: the series each kind draws (an allocation that old sglang printed is an inferred state)
SERIES = {
    "weights": {names.WEIGHTS, names.FREE},
    "kv": {names.COMMITTED, names.INFERRED},
    "va": {names.VA_BOUND},
    "host": {names.HOST},
    "free": {names.FREE},
}
#: every non-empty subset of the kinds that draw a series of their own (free memory alone, once); a host-only
#: run first and again among the others, where it took a neighbour's axes
SUBSETS = [
    ("host",),
    *(subset for size in range(1, 5) for subset in itertools.combinations(list(KINDS)[:4], size)),
    ("free",),
]
#: the page's body margin in Chromium (the figure is drawn that far from the screenshot's corner)
BODY_MARGIN = 8


@dataclass(frozen=True)
class Drawn:
    """The figure of every subset's run (one panel each) and its pixels, as Chromium drew the HTML and the PNG."""

    figure: Any
    pixels: dict[str, Any]


@pytest.fixture(scope="module")
def every_subset(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Drawn:
    """One log per subset, each on a day of its own (no two runs share a time axis), drawn once in one figure."""
    folder = tmp_path_factory.mktemp("subsets")
    logs = []
    for day, subset in enumerate(SUBSETS):
        start = datetime(2026, 8, 1, 10, tzinfo=UTC) + timedelta(days=day)
        lines = [line for kind in subset for line in KINDS[kind]]
        log = folder / f"{day:02}-{'-'.join(subset)}.log"
        log.write_text(
            "".join(
                f"[{start + timedelta(seconds=30 * n):%Y-%m-%d %H:%M:%S} TP0] {line}\n" for n, line in enumerate(lines)
            )
        )
        logs.append(log)
    figure = memory_figure(runs_of(*logs))
    assert len(figure.layout.annotations) == len(SUBSETS)  # a run, and so a panel, per subset
    html, png = folder / "memory.html", folder / "memory.png"
    for out in (html, png):
        assert plot(logs, output=out).exit_status == commands.EXIT_OK
    pixels = screen_and_png(chromium, figure, html, png, folder)
    assert all(drawn.size == (figure.layout.width, figure.layout.height) for drawn in pixels.values())
    return Drawn(figure, pixels)


def screen_and_png(chromium: str, figure: Any, html: Path, png: Path, folder: Path) -> dict[str, Any]:
    """The figure's pixels as Chromium shows ``html`` (its body margin cut off) and as Kaleido wrote ``png``.

    The page must load with a silent console: an error there is a figure the user does not see.
    """
    from PIL import Image  # noqa: PLC0415 - the pixels of a screenshot, for these tests only

    shot = folder / "screenshot.png"
    width, height = figure.layout.width + 2 * BODY_MARGIN, figure.layout.height + 2 * BODY_MARGIN
    result = headless(
        chromium, html.as_uri(), f"--screenshot={shot}", f"--window-size={width},{height}", profile=folder / "profile"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert console(result.stderr) == []
    pixels = {}
    for medium, image, margin in (("html", shot, BODY_MARGIN), ("png", png, 0)):
        with Image.open(image) as opened:
            pixels[medium] = opened.convert("RGB").crop(
                (margin, margin, margin + figure.layout.width, margin + figure.layout.height)
            )
    return pixels


def colour_of(trace: Any) -> tuple[int, int, int]:
    """The colour a trace is drawn in: its line's, or its markers' where it draws only markers."""
    colour = trace.marker.color if trace.mode == "markers" else trace.line.color
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def plot_area(figure: Any, row: int) -> tuple[int, int, int, int]:
    """Panel ``row``'s plot area in pixels (left, top, right, bottom), from the axes' domains and the margins."""
    layout = figure.layout
    x = layout["xaxis" if row == 1 else f"xaxis{row}"]
    y = layout["yaxis" + x.anchor[1:]]
    inner_width = layout.width - layout.margin.l - layout.margin.r
    inner_height = layout.height - layout.margin.t - layout.margin.b
    left, right = (round(layout.margin.l + end * inner_width) for end in x.domain)
    top, bottom = (round(layout.margin.t + (1 - end) * inner_height) for end in reversed(y.domain))
    return left, top, right, bottom


def painted(colours: list[tuple[int, tuple[int, int, int]]], colour: tuple[int, int, int]) -> int:
    """How many pixels (``Image.getcolors``' counts) are ``colour``, give or take the blending of an edge."""
    return sum(count for count, seen in colours if max(abs(a - b) for a, b in zip(seen, colour, strict=True)) <= 12)


@pytest.mark.parametrize("medium", ["html", "png"])
@pytest.mark.parametrize(
    "row", range(1, len(SUBSETS) + 1), ids=[f"{n}-{'-'.join(s)}" for n, s in enumerate(SUBSETS, 1)]
)
def test_every_subset_of_event_kinds_is_drawn_in_its_own_panel(every_subset: Drawn, row: int, medium: str) -> None:
    """Each run's series are painted inside its own panel, and no other run's: in the browser's HTML and the PNG."""
    figure = every_subset.figure
    area = every_subset.pixels[medium].crop(plot_area(figure, row))
    panel = area.getcolors(area.width * area.height)
    axis = "x" if row == 1 else f"x{row}"
    traces = [trace for trace in figure.data if trace.xaxis == axis]
    assert {trace.name for trace in traces} == set().union(*(SERIES[kind] for kind in SUBSETS[row - 1]))
    own = {colour_of(trace) for trace in traces}
    for colour in own:
        assert painted(panel, colour) >= 8, f"{medium}: panel {row} does not show its series {colour}"
    for colour in {colour_of(trace) for trace in figure.data} - own:
        assert painted(panel, colour) <= 2, f"{medium}: panel {row} shows another run's series {colour}"


def test_the_occupancy_panel_draws_offline(chromium: str, tmp_path: Path, profile: Path) -> None:
    """``--usage``: the run's memory and, under it, its KV cache's share in use, drawn by the browser."""
    log, out = tmp_path / "server.log", tmp_path / "usage.html"
    log.write_text(
        "[2025-02-27 04:40:00 TP0] Load weight begin. avail mem=70.00 GB\n"
        "[2025-02-27 04:40:31 TP0] KV Cache is allocated. #tokens: 524288, K size: 4.05 GB, V size: 4.05 GB\n"
        + "".join(
            f"[2025-02-27 04:4{n}:39 TP0] Decode batch. #running-req: 8, #token: {n}000, token usage: 0.{n}0, "
            "gen throughput (token/s): 186.64, #queue-req: 0\n"
            for n in range(1, 8)
        )
    )
    result = kvlog_plot(log, "--usage", "all", "-o", out)
    assert result.returncode == commands.EXIT_OK, result.stderr
    shown = headless(chromium, out.as_uri(), "--dump-dom", profile=profile)
    assert shown.returncode == 0, shown.stderr[-2000:]
    figure = drawn(shown.stdout)
    assert names.USAGE in figure.legend
    assert figure.count("trace", "scatter") == len(memory_figure(runs_of(log)).data) + 1  # the occupancy line
    assert console(shown.stderr) == []
