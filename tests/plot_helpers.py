"""What the tests of ``kvlog plot`` share: the corpus logs it is shown on, and the command run."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import orjson
from cli_harness import kvlog_text

from kvlog import commands
from kvlog.plot.timeline import Timeline, timelines

CORPUS = Path(__file__).parent / "corpus"
#: VA upper bounds inferred from arena lines and from later post-capture lines, five runs on TP0
POSTCAPTURE = CORPUS / "postcapture_before_fix_2026_07.log"
#: SWA and Full sub-pools really allocated, their summary, and two host pools on TP0
HYBRID = CORPUS / "hybrid_swa_2026.log"
DOCS_FIGURE = Path(__file__).parent.parent / "docs" / "memory.svg"
GIB = 1 << 30

#: ``kvlog plot`` as a real process, through the ``kvlog`` command (a prelude can run before it)
PLOT = [
    sys.executable,
    "-c",
    "import sys; from kvlog.cli import main; main(['plot', *sys.argv[1:]], prog_name='kvlog')",
]


def kvlog_plot(
    *args: str | Path, prelude: str = "", env: dict[str, str] | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``kvlog plot ARGS``, in this process unless it needs one of its own.

    A process runs it where ``prelude`` must run first (to hide a package, as if not installed) or where
    ``process`` says so: a PNG drawn by the browser, whose own standard error only a process captures.
    """
    if not prelude and not process:
        return kvlog_text("plot", *args, env=env)
    command = PLOT if not prelude else [sys.executable, "-c", f"{prelude}; {PLOT[2]}"]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, check=False, env=env)


def events_of(*inputs: Path) -> list[dict[str, object]]:
    """The current events of ``inputs``, as ``kvlog plot`` reads them."""
    out = io.BytesIO()
    outcome = commands.migrate(inputs, only_events=True, keep_original=True, stdout=out)
    assert outcome.exit_status == commands.EXIT_OK, outcome.problems
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def runs_of(*inputs: Path) -> list[Timeline]:
    return timelines(events_of(*inputs))
