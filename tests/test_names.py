"""Names that mean one thing (issue 31 item 4): a module's path says its job, an outcome is a command's.

Three unrelated ``runner.py``, three validation modules under one word and eight ``Outcome``
classes of no common shape made a newcomer open files to learn what they did. These tests keep
the rule: a basename names one job across the package, and every command outcome ends a run the
same way (``kvlog.commands.CommandOutcome``).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from collections import Counter
from pathlib import Path

import pytest

from kvlog import commands
from kvlog.commands._deprecated import Renamed

PACKAGE = Path(commands.__file__).resolve().parent.parent
#: basenames several modules may share: a package's ``__init__``, and ``errors``, one module per layer
#: for that layer's exceptions (httpx's ``_exceptions``)
SHARED = {"__init__", "errors"}
#: words that say a module runs, validates or helps, not what: its path must say what it does
JOBLESS = {"runner", "validate", "validation", "validator", "utils", "util", "helpers", "common", "misc"}
#: the exported outcome classes; ``CommandOutcome`` is the shape they share
OUTCOMES = sorted(name for name in commands.__all__ if name.endswith("Outcome") and name != "CommandOutcome")


def _modules() -> list[Path]:
    return sorted(path.relative_to(PACKAGE) for path in PACKAGE.rglob("*.py"))


def test_no_two_modules_outside_the_cli_share_a_basename() -> None:
    """``kvlog/cli/X.py`` is the command or option X, beside the library module it fronts; elsewhere, one job."""
    library = [path for path in _modules() if path.parts[0] != "cli"]
    counts = Counter(path.stem for path in library)
    shared = {stem: [str(p) for p in library if p.stem == stem] for stem, n in counts.items() if n > 1}
    assert {stem: paths for stem, paths in shared.items() if stem not in SHARED} == {}


def test_no_library_module_is_named_after_a_jobless_word() -> None:
    """``kvlog/cli/validate.py`` and ``kvlog/commands/_validate.py`` are the command ``validate``; nothing else is."""
    named = [str(path) for path in _modules() if path.stem in JOBLESS and path.parts[0] not in {"cli", "commands"}]
    assert named == []


def test_only_a_command_outcome_is_called_an_outcome() -> None:
    """What one input of a batch became, or an inclusion judgement, is named for what it is."""
    outcomes = sorted(
        f"{path}:{node.name}"
        for path in _modules()
        for node in ast.walk(ast.parse((PACKAGE / path).read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Outcome") and path.parts[0] != "commands"
    )
    assert outcomes == []


def test_the_command_outcomes_are_the_eight_commands_but_integrate() -> None:
    assert OUTCOMES == [
        "CheckOutcome",
        "FollowOutcome",
        "LedgerOutcome",
        "MigrateOutcome",
        "PlotOutcome",
        "SummarizeOutcome",
        "ValidateOutcome",
    ]


@pytest.mark.parametrize("name", OUTCOMES)
def test_every_command_outcome_has_the_common_shape(name: str) -> None:
    """An ``int`` exit status and a status line (``str``, or ``None`` where a run may have nothing to say)."""
    outcome = getattr(commands, name)
    fields = {field.name: field.type for field in dataclasses.fields(outcome)}
    assert fields.get("exit_status") in {int, "int"}
    line = inspect.getattr_static(outcome, "status_line")
    assert isinstance(line, property)
    assert typing.get_type_hints(line.fget)["return"] in {str, str | None}


@pytest.mark.parametrize("name", OUTCOMES)
def test_summary_on_an_outcome_is_only_the_summary_summarize_makes(name: str) -> None:
    """``outcome.summary`` was a string for migrate and plot and a counts object for validate.

    Those keep their 0.1.0 name only as a deprecated alias (``Renamed``) of the new one.
    """
    outcome = getattr(commands, name)
    fields = {field.name for field in dataclasses.fields(outcome)}
    assert ("summary" in fields) is (name == "SummarizeOutcome")
    if name != "SummarizeOutcome":
        assert isinstance(inspect.getattr_static(outcome, "summary", Renamed("")), Renamed)


def test_a_real_outcome_satisfies_the_protocol(tmp_path: Path) -> None:
    """In use, not only in its class: a validate run's outcome, as the CLI ends it."""
    log = tmp_path / "events.jsonl"
    log.write_text('{"event": "nope"}\n', encoding="utf-8")
    outcome: commands.CommandOutcome = commands.validate(log, on_finding=lambda _: None)
    assert outcome.exit_status == commands.EXIT_FINDINGS
    assert outcome.status_line == "1 events, 1 invalid, 0 non-JSON lines, 0 skipped, 1 problems"


def test_the_0_1_0_name_still_reads_the_new_attribute_with_a_deprecation_warning(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text('{"event": "nope"}\n', encoding="utf-8")
    outcome = commands.validate(log, on_finding=lambda _: None)
    with pytest.warns(DeprecationWarning, match=r"ValidateOutcome\.summary is deprecated: use \.counts"):
        assert outcome.summary is outcome.counts
