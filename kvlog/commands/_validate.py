"""``validate``: check JSON-lines logs against the catalog."""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterable
from contextlib import AbstractContextManager, closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from kvlog.commands import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from kvlog.commands._deprecated import Renamed
from kvlog.commands._engine import cluster_for
from kvlog.errors import OptionError
from kvlog.file_validation import (
    Counts,
    LineProblem,
    Skips,
    Unreadable,
    unreadable_reason,
    validate_input,
    validate_on,
)
from kvlog.io.errors import InputError
from kvlog.io.expansion import expand_inputs
from kvlog.io.inputs import STDIN
from kvlog.io.progress import Advance, InOrder, ignore
from kvlog.schema.event_validator import EventValidator
from kvlog.text.printable import printable, printable_name


@dataclass(frozen=True)
class InputFailure:
    """An input that could not be read (or not to its end), and why."""

    name: str
    reason: str

    def __str__(self) -> str:
        """``NAME: REASON`` on one line, whatever either holds (see ``kvlog.text.printable``)."""
        return f"{printable_name(self.name)}: {printable(self.reason)}"


@dataclass(frozen=True)
class ValidateOutcome:
    """What a validation run found.

    ``findings`` holds every finding only when ``validate`` was given no ``on_finding`` callback: a
    caller that prints findings as they come (a log of many GiB can hold millions) does not hold them.
    """

    exit_status: int
    #: the counts over every input
    counts: Counts
    #: the inputs that could not be read, in the order given
    input_failures: tuple[InputFailure, ...] = ()
    findings: tuple[LineProblem, ...] = ()

    #: the 0.1.0 name of ``counts``
    summary = Renamed("counts")

    @property
    def status_line(self) -> str:
        """One line: the counts."""
        return str(self.counts)


def validate(
    inputs: str | Path | Iterable[str | Path],
    *,
    skip_non_json: bool = False,
    skip_unknown_events: bool = False,
    jobs: int | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    on_finding: Callable[[LineProblem], None] | None = None,
    on_input_failure: Callable[[InputFailure], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
    progress: Callable[[list[str]], AbstractContextManager[Advance]] | None = None,
) -> ValidateOutcome:
    """Validate ``inputs`` (files, globs, directories, ``-`` for standard input, as ``migrate`` takes them).

    Each finding goes to ``on_finding`` as it is found, in input and line order (``jobs`` worker
    processes per plain file of 16 MiB or more, by default one per CPU, change nothing in it); without
    a callback, the outcome collects them. An input that cannot be read goes to ``on_input_failure``
    (and into the outcome), and the other inputs are still validated. An exception a callback raises
    ends the run and propagates. ``engine`` ``ray`` validates on the Ray cluster at ``ray_address``
    (default: the one this machine runs, else a new local one; ``on_notice`` hears which), a task per
    input, with the same findings, counts and exit status; standard input is read here all the same.
    ``progress`` is given the inputs and yields the callback that hears, as the run goes, how many
    more files are done and how many more of their bytes on disk (``kvlog.io.progress``).
    Exit status: 0 every line is a valid event, 1 one is not, 2 an input
    could not be read.
    """
    if jobs is not None and jobs < 1:
        raise OptionError("{jobs} {given}: at least one worker is needed", given=jobs)
    expansion = expand_inputs(tuple(map(str, [inputs] if isinstance(inputs, (str, Path)) else inputs)))
    validator = EventValidator()
    skips = Skips(non_json=skip_non_json, unknown_events=skip_unknown_events)
    counts = Counts()
    kept: list[LineProblem] = []
    failures: list[InputFailure] = []
    found = on_finding or kept.append

    def failed(failure: InputFailure) -> None:
        failures.append(failure)
        if on_input_failure is not None:
            on_input_failure(failure)

    for problem in expansion.problems:  # a directory, pattern or store prefix that lists nothing
        failed(InputFailure(problem.name, problem.reason))
    say = on_notice or (lambda _: None)
    for notice in expansion.notices():
        say(notice)
    paths = expansion.names
    with (
        cluster_for(engine, jobs=jobs, ray_address=ray_address, on_notice=say) as cluster,
        progress(paths) if progress is not None else nullcontext(ignore) as advance,
    ):
        tally = InOrder(paths, advance)
        if cluster is not None and STDIN not in paths:
            for result in validate_on(cluster, paths, counts, validator, skips=skips, progress=tally):
                if isinstance(result, Unreadable):
                    failed(InputFailure(result.name, result.reason))
                else:
                    found(result)
        else:
            for name in paths:
                failure = _validate_one(name, counts, validator, skips, jobs, found, tally)
                tally.done()
                if failure is not None:
                    failed(failure)
    status = EXIT_ERROR if failures else EXIT_OK if counts.ok else EXIT_FINDINGS
    return ValidateOutcome(status, counts, tuple(failures), tuple(kept))


def _validate_one(  # noqa: PLR0917 - validate's state, passed on
    name: str,
    counts: Counts,
    validator: EventValidator,
    skips: Skips,
    jobs: int | None,
    found: Callable[[LineProblem], None],
    tally: InOrder,
) -> InputFailure | None:
    """Validate one input; return why it could not be read, if it could not.

    ``found`` is called outside the reading, so that an error of its own (an OSError writing the
    findings) is never taken for the input's.
    """
    if name == STDIN and sys.stdin is None:  # started with descriptor 0 closed (`<&-`)
        return InputFailure(name, "cannot read: standard input is closed")
    findings = cast(
        Generator[LineProblem], validate_input(name, counts, validator, skips=skips, jobs=jobs, on_read=tally.read)
    )
    with closing(findings):
        while True:
            try:
                finding = next(findings)
            except StopIteration:
                return None
            except (InputError, OSError) as exc:
                return InputFailure(name, unreadable_reason(name, exc))
            found(finding)
