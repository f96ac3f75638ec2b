"""Time of ``kvlog plot`` (self-contained HTML) on a dense multi-rank fleet log, against other source trees.

``plot`` reads its inputs through ``migrate``; until issue 31 it had ``migrate`` write every event as a
JSON line into memory and decoded each again. The log, the rounds, the pinning and ``--baseline TREE``
are ``bench_summarize``'s (see there); every tree must write the same figure (Plotly's random div id
aside). Drawing the figure
(Plotly: one panel per rank's server run) is part of what is timed, as a user waits for it: the
smaller default log keeps the panels to a few hundred.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_plot.py [--lines 100000] [--rounds 3] \\
        [--baseline /tmp/base-1fdc331 --baseline /tmp/base-84eb474] [--json out.json]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import bench_summarize

#: the id Plotly gives each figure's ``<div>``, new at every run
PLOTLY_DIV_ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def plot_command(log: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "kvlog", "plot", str(log), "-o", str(output)]


def without_ids(html: bytes) -> bytes:
    """The figure as it is compared between trees: the same but for Plotly's random div id."""
    return PLOTLY_DIV_ID.sub(b"ID", html)


if __name__ == "__main__":
    bench_summarize.__doc__ = __doc__
    bench_summarize.main(plot_command, "kvlog plot", ".html", without_ids)
