"""``summarize``: one table per fleet, from old logs or kvlog events, of what each run held and what logs overstated.

The inputs are read by ``migrate`` (only the events, and the memory lines no rule read), so an old log
and a file of kvlog events give the same rows, with the same inferences: nothing here parses a line.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

from kvlog.commands import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from kvlog.commands._migrate import migrated_events
from kvlog.errors import OptionError
from kvlog.io.inputs import STDIN
from kvlog.io.outputs import atomic_output, expand_inputs, stdout_binary
from kvlog.plot.timeline import timelines
from kvlog.summary import FORMATS, FleetSummary, render, summarize_runs


@dataclass(frozen=True)
class SummarizeOutcome:
    """What a summarize run found."""

    exit_status: int
    summary: FleetSummary
    #: events the inputs held
    events: int
    #: each input that could not be expanded or read, with the reason, in the order met
    problems: tuple[str, ...] = ()


def summarize(
    inputs: str | Path | Iterable[str | Path],
    *,
    output_format: str = "text",
    output: str | Path | None = None,
    source: str | None = None,
    migrations: str | Path | None = None,
    stdout: IO[bytes] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> SummarizeOutcome:
    """Summarize every server run and rank in ``inputs`` (as ``migrate`` takes them) as ``kvlog summarize`` does.

    The table (``output_format``: ``text``, ``json`` or ``csv``) goes to ``output`` (written whole, or not
    at all) or to ``stdout`` (default the process's standard output). The exit status is ``EXIT_OK``;
    ``EXIT_FINDINGS`` when the inputs hold no memory event (an empty table is still written);
    ``EXIT_ERROR`` when an input could not be read (the others are still summarized). Raises
    ``OptionError`` for a format it does not write, ``OutputError``, and what ``migrate`` raises.
    """
    if output_format not in FORMATS:
        raise OptionError("{output_format} {given}: one of {formats}", given=output_format, formats=", ".join(FORMATS))
    names = tuple(map(str, [inputs] if isinstance(inputs, (str, Path)) else inputs))
    if output is not None and str(output) != "-":
        _refuse_an_input(Path(output), names)
    with tempfile.TemporaryDirectory(prefix="kvlog-summarize-") as scratch:
        dead = Path(scratch) / "unparsed.jsonl"
        events, migrated = migrated_events(
            names, source=source, migrations=migrations, on_notice=on_notice, dead_letter=dead
        )
        letters = [orjson.loads(line) for line in dead.read_bytes().splitlines()] if dead.exists() else []
    summary = summarize_runs(timelines(events), letters)
    text = render(summary, output_format).encode()
    if output is None or str(output) == "-":
        sink = stdout or stdout_binary()
        sink.write(text)
        sink.flush()
    else:
        with atomic_output(str(output)) as written:  # a str: a URI is an object (kvlog.io.store)
            written.write(text)
    failed = EXIT_ERROR if migrated.problems else EXIT_OK
    status = failed or (EXIT_OK if summary.rows else EXIT_FINDINGS)
    return SummarizeOutcome(status, summary, len(events), migrated.problems)


def _refuse_an_input(output: Path, inputs: tuple[str, ...]) -> None:
    """``kvlog summarize server.log -o server.log`` would replace the log with its table."""
    if not output.exists():
        return
    for name in expand_inputs(inputs).names:
        if name != STDIN and Path(name).exists() and output.samefile(name):
            template = "{output} {path} is the input {input}; it would be overwritten"
            raise OptionError(template, path=str(output), input=name)
