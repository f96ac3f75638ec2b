"""Every memory format sglang and vLLM released has a decision, and its lines come out as decided.

The formats are harvested from every release (``formats/<server>.json``, ``scripts/harvest_formats.py``)
and held to the rules of ``formats/<server>.decisions.toml``. Sample lines are written from each harvested
format string, with the prefix of the era it was printed in, and run through the real migrator:
an ``event`` format becomes that event with every printed figure as exact bytes, a ``known`` one is
recognised and makes no event, and no line of either is reported as unread.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.migration.release_dates import RELEASE_DATES

ROOT = Path(__file__).resolve().parent.parent


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("format_decisions", ROOT / "scripts" / "format_decisions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["format_decisions"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


TOOL = _load_tool()
RULES = TOOL.load_rules()
#: usage lines are events only when asked: every event format is read here, the usage lines' too
MIGRATOR = Migrator(load_chain(), MigrateOptions(usage="all"))
RELEASES = {
    server: json.loads((ROOT / "formats" / f"{server}.json").read_text())["releases"] for server in TOOL.SERVERS
}
DECIDED = [(fmt, TOOL.decide(fmt, RULES)) for server in TOOL.SERVERS for fmt in TOOL.load_formats(server)]


def _migrate(line: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    out, dead = io.BytesIO(), []
    report = MIGRATOR.migrate("sample.log", io.BytesIO((line + "\n").encode()), out, dead.append)
    events = [json.loads(raw) for raw in out.getvalue().splitlines() if raw.startswith(b'{"event"')]
    return events, dead, dict(report.companions)


def test_every_harvested_format_has_a_decision() -> None:
    undecided = [f"{fmt.id} ({fmt.first}..{fmt.last}): {fmt.text[:100]}" for fmt, rule in DECIDED if rule is None]
    assert undecided == [], "add a rule to formats/<server>.decisions.toml:\n" + "\n".join(undecided)


def test_the_generated_files_are_current() -> None:
    """FORMATS.md and the known.toml files are written from the harvest and the decisions, never by hand."""
    stale = [str(path.relative_to(ROOT)) for path, text in TOOL.generated().items() if path.read_text() != text]
    assert stale == [], "run: .venv/bin/python scripts/format_decisions.py --write"


EVENTS = [(fmt, rule) for fmt, rule in DECIDED if rule is not None and rule.kind == "event"]
KNOWN = [(fmt, rule) for fmt, rule in DECIDED if rule is not None and rule.kind == "known"]


@pytest.mark.parametrize(("fmt", "rule"), EVENTS, ids=[fmt.id for fmt, _ in EVENTS])
def test_an_event_format_becomes_its_event_with_every_figure_exact(fmt: Any, rule: Any) -> None:
    samples = TOOL.samples(fmt, rule, RELEASES[fmt.server])
    assert len(samples) >= 2
    for sample in samples:
        events, dead, _ = _migrate(sample.line)
        assert dead == [], f"{sample.line!r} was not read: {dead[0]['reason']}"
        assert [e["event"] for e in events] == [rule.value], sample.line
        event = events[0]
        figures = {value for name, value in event.items() if name.endswith("_bytes") and isinstance(value, int)}
        uncertainty = event.get("migrated", {}).get("uncertainty_bytes", {})
        read = FAMILIES[fmt.server].recognise(FAMILIES[fmt.server].prefix.split(sample.line).message)
        assert read is not None, sample.line
        # a wording that prints one figure in parts (``d=…GB, k=…GB, g=…GB``) holds their sum
        expected_figures = [sum(sample.expected_bytes())] if read.rule.template.sums else sample.expected_bytes()
        for expected in expected_figures:
            assert expected in figures, f"{sample.line!r}: {expected} bytes not in {sorted(figures)}"
        assert all(spread > 0 for spread in uncertainty.values())


FAMILIES = {family.server: family for family in MIGRATOR.families}
#: formats of a server's first release: nothing before it bounds their lines
LATER = [(fmt, rule) for fmt, rule in EVENTS if fmt.first_index > 0]


@pytest.mark.parametrize(("fmt", "rule"), LATER, ids=[fmt.id for fmt, _ in LATER])
def test_the_wording_that_reads_a_format_knows_the_releases_that_print_it(fmt: Any, rule: Any) -> None:
    """Every template that reads a released format bounds its lines' year (issue 32, class 7) by no later
    a day than the release before the format's first: the development builds after that one print it."""
    family = FAMILIES[fmt.server]
    before = RELEASES[fmt.server][fmt.first_index - 1]
    for sample in TOOL.samples(fmt, rule, RELEASES[fmt.server]):
        read = family.recognise(family.prefix.split(sample.line).message)
        assert read is not None, sample.line
        window = read.rule.window
        assert window is not None, f"{read.generation.id}: {read.rule.template.text!r} has no window of releases"
        released = dict(RELEASE_DATES[fmt.server])
        assert window[1] <= released.get(before, fmt.first_date), (fmt.id, window)


@pytest.mark.parametrize(("fmt", "rule"), KNOWN, ids=[fmt.id for fmt, _ in KNOWN])
def test_a_known_format_is_recognised_and_makes_no_event(fmt: Any, rule: Any) -> None:
    for sample in TOOL.samples(fmt, rule, RELEASES[fmt.server]):
        events, dead, companions = _migrate(sample.line)
        assert (events, dead) == ([], []), sample.line
        assert sum(companions.values()) == 1, f"{sample.line!r} passed unrecognised"


@pytest.mark.parametrize(
    ("line", "event", "figures"),
    [
        # vLLM 0.14-0.26 (gpu_worker.py builds it in `msg`); the figures of a user's start-up, issue 32
        (
            "(EngineCore_DP0 pid=123) INFO 10-14 16:37:13 [gpu_worker.py:298] Free memory on device (30.27/31.4 GiB) "
            "on startup. Desired GPU memory utilization is (0.9, 28.26 GiB). Actual usage is 14.2 GiB for weight, "
            "1.4 GiB for peak activation, 0.2 GiB for non-torch memory, and 0.5 GiB for CUDAGraph memory. Replace "
            "gpu_memory_utilization config with `--kv-cache-memory=13218373836` (12.31 GiB) to fit into requested "
            "memory, or `--kv-cache-memory=15455670374` (14.39 GiB) to fully utilize gpu memory. Current kv cache "
            "memory in use is 12.81 GiB.",
            "memory.startup_summary",
            {"total_bytes": 33715493274, "weights_bytes": 15247133901, "suggested_kv_budget_bytes": 13218373836},
        ),
        (
            "(EngineCore_DP0 pid=123) INFO 10-14 16:37:13 [gpu_worker.py:250] Initial free memory 70.5 GiB, reserved "
            "20.0 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling.",
            "kv_pool.memory_specified",
            {"initial_free_bytes": 75698798592, "kv_cache_bytes": 21474836480},
        ),
        (
            "(EngineCore_DP0 pid=123) DEBUG 10-14 16:37:10 [gpu_worker.py:290] Memory profiling takes 5.21 seconds. "
            "Total non KV cache memory: 15.8GiB; torch peak memory increase: 1.4GiB; non-torch forward increase "
            "memory: 0.2GiB; weights memory: 14.2GiB.",
            "memory.profile_result",
            {"non_kv_cache_bytes": 16965120819, "activation_peak_bytes": 1503238554, "weights_bytes": 15247133901},
        ),
    ],
)
def test_a_vllm_wording_built_in_a_variable_is_read_into_its_event(
    line: str, event: str, figures: dict[str, int]
) -> None:
    """vLLM's wordings the harvest found only by following data flow state memory held: each is an event."""
    events, dead, _ = _migrate(line)
    assert dead == []
    assert [e["event"] for e in events] == [event]
    assert {name: events[0][name] for name in figures} == figures


def test_a_progress_bar_built_in_a_variable_becomes_its_event() -> None:
    """sglang's piecewise bar sets its description from a variable: the harvest follows it, the free memory is read."""
    events, dead, _ = _migrate(
        "[2025-11-02 10:00:05 TP0] Capturing num tokens (num_tokens=8192 avail_mem=10.23 GB): 100%|##| 58/58"
    )
    assert dead == []
    assert [(e["event"], e["stage"], e["num_tokens"], e["avail_bytes"]) for e in events] == [
        ("cuda_graph.capture_progress", "step", 8192, round(10.23 * (1 << 30)))
    ]
