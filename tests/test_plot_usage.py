"""``kvlog plot --usage``: the KV cache's occupancy over time, a panel under each run's memory.

The timeline carries the last usage line's share on every sample; the figure draws the usage lines of
a run as a step line in percent, in a panel of its own, never on the memory axis (it is a share of
slots, not bytes). Without ``--usage`` nothing of it is drawn, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plot_helpers import kvlog_plot

from kvlog import commands
from kvlog.commands._migrate import migrated_events
from kvlog.commands._plot import plot
from kvlog.plot import figure as names
from kvlog.plot.figure import memory_figure
from kvlog.plot.timeline import timelines

LOG = "".join(
    line + "\n"
    for line in (
        "[2025-02-27 04:40:00 TP0] Load weight begin. avail mem=70.00 GB",
        "[2025-02-27 04:40:30 TP0] Load weight end. type=LlamaForCausalLM, "
        "dtype=torch.bfloat16, avail mem=55.00 GB, mem usage=15.00 GB.",
        "[2025-02-27 04:40:31 TP0] KV Cache is allocated. #tokens: 524288, K size: 4.05 GB, V size: 4.05 GB",
        "[2025-02-27 04:40:32 TP0] Memory pool end. avail mem=45.00 GB",
        "[2025-02-27 04:46:39 TP0] Decode batch. #running-req: 8, #token: 62531, "
        "token usage: 0.12, gen throughput (token/s): 186.64, #queue-req: 0",
        "[2025-02-27 04:46:41 TP0] Decode batch. #running-req: 8, #token: 62851, "
        "token usage: 0.13, gen throughput (token/s): 185.93, #queue-req: 0",
        "[2025-02-27 04:47:41 TP0] Decode batch. #running-req: 80, #token: 262851, "
        "token usage: 0.50, gen throughput (token/s): 1185.93, #queue-req: 3",
    )
)
#: a log pasted from the middle of a run: its usage lines alone, no memory line
MIDDLE = "".join(
    line + "\n"
    for line in (
        "[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0, ",
        "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.07, "
        "cuda graph: True, gen throughput (token/s): 1.06, #queue-req: 0, ",
    )
)


def migrated(tmp_path: Path, text: str, usage: str) -> list[dict[str, Any]]:
    log = tmp_path / "server.log"
    log.write_text(text)
    collected, _ = migrated_events(
        log,
        source=None,
        migrations=None,
        on_notice=None,
        keep_original=True,
        usage=usage,  # type: ignore[arg-type]
    )
    return collected.events


def rows_of(figure: Any) -> dict[str, list[Any]]:
    """Each panel's traces, by the panel's title."""
    titles = [annotation.text for annotation in figure.layout.annotations]
    return {
        title: [trace for trace in figure.data if trace.xaxis == ("x" if row == 1 else f"x{row}")]
        for row, title in enumerate(titles, start=1)
    }


def test_a_run_with_usage_lines_gets_an_occupancy_panel_under_its_memory(tmp_path: Path) -> None:
    (run,) = timelines(migrated(tmp_path, LOG, "all"))
    assert run.has_memory and run.has_usage
    assert [sample.usage for sample in run.samples][-3:] == [0.12, 0.13, 0.5]
    figure = memory_figure([run])
    rows = rows_of(figure)
    assert list(rows) == [run.title, f"{run.title} · KV cache in use"]
    (occupancy,) = rows[f"{run.title} · KV cache in use"]
    assert occupancy.name == names.USAGE and list(occupancy.y) == [12.0, 13.0, 50.0] and occupancy.line.shape == "hv"
    assert names.USAGE not in {trace.name for trace in rows[run.title]}  # never on the memory axis
    assert figure.layout.yaxis2.title.text == "KV cache in use (%)" and list(figure.layout.yaxis2.range) == [0, 100]


def test_sampled_draws_the_moves(tmp_path: Path) -> None:
    (run,) = timelines(migrated(tmp_path, LOG, "sampled"))
    figure = memory_figure([run])
    (occupancy,) = rows_of(figure)[f"{run.title} · KV cache in use"]
    assert list(occupancy.y) == [12.0, 50.0]  # 0.13 moved less than the step


def test_a_run_of_usage_lines_alone_draws_only_its_occupancy(tmp_path: Path) -> None:
    (run,) = timelines(migrated(tmp_path, MIDDLE, "all"))
    assert not run.has_memory
    assert list(rows_of(memory_figure([run]))) == [f"{run.title} · KV cache in use"]


def test_without_usage_no_occupancy_is_drawn(tmp_path: Path) -> None:
    (run,) = timelines(migrated(tmp_path, LOG, "none"))
    assert not run.has_usage
    assert list(rows_of(memory_figure([run]))) == [run.title]
    assert timelines(migrated(tmp_path, MIDDLE, "none")) == []


def test_plot_usage_on_the_command_line(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "memory.html"
    log.write_text(LOG)
    result = kvlog_plot(log, "--usage", "sampled", "-o", out)
    assert result.returncode == commands.EXIT_OK, result.stderr
    assert result.stderr == f"kvlog plot: 6 event(s), 1 run(s) drawn to {out}\n"
    assert names.USAGE in out.read_text()
    outcome = plot(log, output=tmp_path / "again.html")
    assert (outcome.exit_status, outcome.events) == (commands.EXIT_OK, 4)
