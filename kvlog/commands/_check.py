"""``check``: schema, migration and corpus rules over an event catalog, for CI (see ``kvlog.check``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

from kvlog.check.driver import CheckOptions, CheckReport, run_check
from kvlog.check.errors import ConfigError, GitNotFound, NotACommit
from kvlog.check.evolution import MODES, Mode
from kvlog.check.findings import count_errors
from kvlog.check.project import resolve_project
from kvlog.check.rendering import status_line
from kvlog.commands import EXIT_FINDINGS, EXIT_OK
from kvlog.errors import OptionError


@dataclass(frozen=True)
class CheckOutcome:
    """What a check found: ``report.findings``, and which rule families did not run, with why."""

    exit_status: int
    report: CheckReport

    @property
    def status_line(self) -> str:
        """One line: what was checked and what was found."""
        return status_line(self.report)


def check(
    path: str | Path | None = None,
    *,
    against: str | None = None,
    mode: str | None = None,
    corpus: str | Path | None = None,
) -> CheckOutcome:
    """Check the catalog at ``path`` as ``kvlog check`` does.

    ``path`` is a directory holding ``schemas/`` (and ``migrations/``), or a project whose
    ``pyproject.toml`` has a ``[tool.kvlog]`` table; by default the working directory's
    ``[tool.kvlog]``, else kvlog's own catalog. ``against`` is a git ref to compare released versions
    with; ``mode`` the compatibility a new version needs (default: the project's, else backward);
    ``corpus`` a directory of golden logs (default: the project's). Exit status: 0 when no finding is
    an error, 1 when one is. Raises ``ConfigError`` when there is no catalog to check and
    ``OptionError`` for a mode, corpus or git ref that cannot be used.
    """
    if mode is not None and mode not in MODES:
        raise OptionError("{mode} {given}: expected one of " + ", ".join(MODES), given=repr(mode))
    if corpus is not None and not Path(corpus).is_dir():
        raise ConfigError(f"{corpus}: not a directory")
    project = resolve_project(Path(path) if path is not None else None)
    chosen = cast(Mode, mode) or project.mode or "backward"
    options = CheckOptions(project, chosen, against, Path(corpus) if corpus is not None else project.corpus)
    try:
        report = run_check(options)
    except GitNotFound:
        raise OptionError("{against} needs git, and git is not on PATH") from None
    except NotACommit as exc:
        raise OptionError("{against} {error}", error=exc) from None
    return CheckOutcome(EXIT_FINDINGS if count_errors(report.findings) else EXIT_OK, report)
