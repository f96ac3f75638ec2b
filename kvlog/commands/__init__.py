"""kvlog's commands as Python functions, one per ``kvlog`` command (as alembic's ``command``).

``kvlog migrate``, ``follow``, ``plot``, ``summarize``, ``ledger``, ``validate``, ``check`` and ``integrate``
are each one function here.
It takes plain arguments (paths as ``str`` or ``Path``, options as keyword arguments named like the command's
flags), decides everything the command decides (which paths a run may write, which options conflict,
what it does with an input it cannot read, the exit status) and returns a frozen outcome: the exit
status and a status line (``CommandOutcome``, the shape all share), the counts and the findings.
The click commands in ``kvlog.cli`` only parse options, call these, print and exit; rules are
tested by calling a function, not by starting a process, and ``follow`` and ``plot`` are built on
the migration engine ``migrate`` uses.

The contract of every command function:

- What stops a run before it starts (options that conflict, an output that names an input, a
  catalog that cannot be found, broken migration files) is raised as a ``KvlogError``; nothing was
  written. ``exit_status_of(error)`` is the status the command line exits with for it. An
  ``OptionError`` names options by their keyword arguments (``in_place``); the CLI words it with its
  flags (``--in-place``).
- A run that starts returns its outcome, whatever it found: an input that could not be read is in
  the outcome (and the exit status), not an exception.
- Nothing is printed. What a command writes as its product goes where the arguments say (``migrate``
  writes events to ``stdout``, a binary stream, when no output file is named); what it has to say
  while it runs (a finding, an input it could not read) goes to a callback as it happens, so that a
  caller can print it at once, in order, without holding it.

Importing this package is cheap: each command's module (and the machinery it needs) is imported the
first time the command is used, so ``kvlog validate`` does not load the migration engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kvlog.errors import KvlogError, OptionError
from kvlog.lazy import lazy_exports

if TYPE_CHECKING:
    from kvlog.commands._check import CheckOutcome, check
    from kvlog.commands._engine import ENGINES
    from kvlog.commands._errors import BrokenMigrations
    from kvlog.commands._follow import FollowOutcome, follow
    from kvlog.commands._integrate import integrate
    from kvlog.commands._ledger import LedgerOutcome, ledger
    from kvlog.commands._migrate import MigrateOutcome, migrate
    from kvlog.commands._plot import PlotOutcome, plot
    from kvlog.commands._summarize import SummarizeOutcome, summarize
    from kvlog.commands._validate import InputFailure, ValidateOutcome, validate

#: every command: the run did what it was asked and found nothing wrong
EXIT_OK = 0
#: validate: a line is not a valid event; check: a finding is an error; migrate with ``strict``: a
#: memory-like line was left unparsed or an event could not be migrated; plot: the inputs hold no
#: memory event to draw (nothing is written)
EXIT_FINDINGS = 1
#: an input or output could not be read or written, a file was left as it was for its safety, the
#: options conflict, or (check) there is no catalog to check
EXIT_ERROR = 2
#: migrate: the migration files are broken
EXIT_BROKEN_MIGRATIONS = 3
# A run stopped by signal N exits 128 + N: ``kvlog.io.errors.Stopped.exit_status``.


class CommandOutcome(Protocol):
    """What every command function's outcome holds, beside its own counts and findings: how the run ended.

    One shape for all of them, so that a caller (the CLI, a CI script) ends any run the same way:
    exit with ``exit_status``, and show ``status_line`` (None: nothing to say) to the person who
    started it; the CLI prints it last, on standard error.
    """

    @property
    def exit_status(self) -> int:
        """``EXIT_OK``, ``EXIT_FINDINGS``, ``EXIT_ERROR`` or ``EXIT_BROKEN_MIGRATIONS``, as documented per command."""

    @property
    def status_line(self) -> str | None:
        """One line for a person: what the run did or found."""


def exit_status_of(error: KvlogError) -> int:
    """The exit status of a run that ``error`` stopped before it started (or, for an I/O failure, ended)."""
    return int(getattr(error, "exit_status", EXIT_ERROR))


__getattr__ = lazy_exports(
    __name__,
    {
        "ENGINES": "kvlog.commands._engine",
        "check": "kvlog.commands._check",
        "CheckOutcome": "kvlog.commands._check",
        "follow": "kvlog.commands._follow",
        "FollowOutcome": "kvlog.commands._follow",
        "integrate": "kvlog.commands._integrate",
        "ledger": "kvlog.commands._ledger",
        "LedgerOutcome": "kvlog.commands._ledger",
        "migrate": "kvlog.commands._migrate",
        "MigrateOutcome": "kvlog.commands._migrate",
        "BrokenMigrations": "kvlog.commands._errors",
        "plot": "kvlog.commands._plot",
        "PlotOutcome": "kvlog.commands._plot",
        "summarize": "kvlog.commands._summarize",
        "SummarizeOutcome": "kvlog.commands._summarize",
        "validate": "kvlog.commands._validate",
        "ValidateOutcome": "kvlog.commands._validate",
        "InputFailure": "kvlog.commands._validate",
    },
)


__all__ = [
    "ENGINES",
    "EXIT_BROKEN_MIGRATIONS",
    "EXIT_ERROR",
    "EXIT_FINDINGS",
    "EXIT_OK",
    "BrokenMigrations",
    "CheckOutcome",
    "CommandOutcome",
    "FollowOutcome",
    "InputFailure",
    "LedgerOutcome",
    "MigrateOutcome",
    "OptionError",
    "PlotOutcome",
    "SummarizeOutcome",
    "ValidateOutcome",
    "check",
    "exit_status_of",
    "follow",
    "integrate",
    "ledger",
    "migrate",
    "plot",
    "summarize",
    "validate",
]
