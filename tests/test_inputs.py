"""How every command expands and reads its inputs: one expansion, each file once, kvlog's own files never logs.

In process, with real files: ``migrate``, ``validate``, ``summarize`` and ``plot`` are given the same
names (directories, quoted globs, files named twice, backups ``--in-place`` kept, compressed files
without their suffix) and must agree on what they read.
"""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pytest

from kvlog import commands
from kvlog.migration.errors import PlanError

CORPUS = Path(__file__).parent / "corpus"
OLD = (CORPUS / "gen2_2025.log").read_bytes()
EVENTS = [line for line in OLD.splitlines(keepends=True) if b"KV Cache is allocated" in line]


def events_of(data: bytes) -> list[bytes]:
    """The JSON event lines of a migration's output."""
    return [line for line in data.splitlines() if line.startswith(b"{")]


def migrated_events(*inputs: str | Path) -> bytes:
    out = io.BytesIO()
    outcome = commands.migrate(inputs, only_events=True, stdout=out)
    assert outcome.exit_status == commands.EXIT_OK, outcome.problems
    return out.getvalue()


def in_place(*inputs: str | Path, suffix: str = ".orig") -> commands.MigrateOutcome:
    return commands.migrate(inputs, in_place=True, backup_suffix=suffix)


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A directory of one old server log."""
    directory = tmp_path / "logs"
    directory.mkdir()
    (directory / "server.log").write_bytes(OLD)
    return directory


# -- 30.3: a backup is never an input of --in-place, whatever its suffix -----------------------------------


def test_a_rerun_with_another_backup_suffix_leaves_the_backup_as_it_is(logs: Path) -> None:
    assert in_place(logs).exit_status == 0
    notices: list[str] = []
    again = commands.migrate(logs, in_place=True, backup_suffix=".pre-v2", on_notice=notices.append)
    assert again.exit_status == 0, again.problems
    assert (logs / "server.log.orig").read_bytes() == OLD, "the only copy of the original was migrated"
    assert sorted(p.name for p in logs.iterdir()) == ["server.log", "server.log.orig"]
    assert [n for n in notices if "backup" in n] == [
        f"skipped 1 backup(s) and temporary file(s) kvlog wrote, not logs (name one to read it): {logs}/server.log.orig"
    ]


@pytest.mark.parametrize("suffix", [".orig", ".pre-v2", "~"])
def test_a_backup_named_on_the_command_line_is_refused_by_in_place(logs: Path, suffix: str) -> None:
    assert in_place(logs / "server.log", suffix=suffix).exit_status == 0
    backup = logs / f"server.log{suffix}"
    refused = in_place(backup, suffix=".again")
    assert refused.exit_status == commands.EXIT_ERROR
    (problem,) = refused.problems
    assert problem.startswith(f"{backup}: not replaced: it is a backup in_place kept")
    assert backup.read_bytes() == OLD and not (logs / f"server.log{suffix}.again").exists()


def test_a_backup_is_recognised_after_it_was_moved_away_from_its_log(logs: Path, tmp_path: Path) -> None:
    assert in_place(logs, suffix=".bak").exit_status == 0
    elsewhere = tmp_path / "kept"
    elsewhere.mkdir()
    (logs / "server.log.bak").rename(elsewhere / "server.log.bak")
    assert in_place(elsewhere, suffix=".x").exit_status == 0
    assert (elsewhere / "server.log.bak").read_bytes() == OLD


def test_where_no_extended_attribute_can_be_set_a_hidden_marker_file_marks_the_backup(
    logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unsupported(*_: object, **__: object) -> None:
        raise OSError(errno.ENOTSUP, "Operation not supported")  # as on a filesystem without user xattrs

    monkeypatch.setattr(os, "setxattr", unsupported)
    monkeypatch.setattr(os, "getxattr", unsupported)
    assert in_place(logs, suffix=".v1").exit_status == 0
    assert (logs / ".server.log.v1.kvlog-backup").is_file()
    assert in_place(logs, suffix=".v2").exit_status == 0
    assert (logs / "server.log.v1").read_bytes() == OLD
    assert not (logs / "server.log.v1.v2").exists()
    assert events_of(migrated_events(logs)) == events_of(migrated_events(logs / "server.log"))


def test_a_backup_kept_before_backups_were_marked_is_told_by_its_default_name(logs: Path) -> None:
    """As 1fdc331 left them: ``NAME.orig`` beside ``NAME``, unmarked; a ``.orig`` with no ``NAME`` is a log."""
    (logs / "server.log.orig").write_bytes(OLD)  # unmarked
    (logs / "server.log").write_bytes(migrated_whole(logs / "server.log.orig"))
    (logs / "alone.log.orig").write_bytes(OLD)
    assert in_place(logs, suffix=".pre-v2").exit_status == 0
    assert (logs / "server.log.orig").read_bytes() == OLD
    assert events_of((logs / "alone.log.orig").read_bytes()), "a file that backs up nothing is a log"


# -- 30.4: backups and temporaries are not logs, in any command --------------------------------------------


def test_after_in_place_every_command_reads_the_directory_as_the_log_alone(logs: Path, tmp_path: Path) -> None:
    assert in_place(logs).exit_status == 0
    (logs / f".server.log.0123456789abcdef{'.kvlog-tmp'}").write_bytes(OLD)  # a killed run's temporary
    alone = commands.summarize(logs / "server.log", stdout=io.BytesIO())
    notices: list[str] = []
    summarized = commands.summarize(logs, stdout=io.BytesIO(), on_notice=notices.append)
    assert (summarized.summary, summarized.events) == (alone.summary, alone.events)
    assert {row.source for row in summarized.summary.rows} == {str(logs / "server.log")}
    assert len([n for n in notices if n.startswith("skipped 1 backup(s)")]) == 1
    out = tmp_path / "out"
    assert commands.migrate(logs, output=f"{out}/").exit_status == 0
    assert sorted(p.name for p in out.iterdir()) == ["server.log"]
    validated = commands.validate(logs, on_finding=lambda _: None)
    assert validated.counts.events == len(events_of((logs / "server.log").read_bytes()))
    pytest.importorskip("plotly")
    drawn = commands.plot(logs, output=tmp_path / "plot.html")
    assert drawn.runs == commands.plot(logs / "server.log", output=tmp_path / "alone.html").runs > 0


def test_a_glob_skips_backups_and_temporaries_too(logs: Path) -> None:
    assert in_place(logs).exit_status == 0
    (logs / "server.log.2.kvlog-tmp").write_bytes(OLD)
    notices: list[str] = []
    validated = commands.validate(f"{logs}/server.log*", on_finding=lambda _: None, on_notice=notices.append)
    assert validated.counts.lines == len((logs / "server.log").read_bytes().splitlines())
    assert notices == [
        "skipped 2 backup(s) and temporary file(s) kvlog wrote, not logs (name one to read it): "
        f"{logs}/server.log.2.kvlog-tmp, {logs}/server.log.orig"
    ]


# -- 30.5: -o DIR/ mirrors the inputs' paths ------------------------------------------------------------


def fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    for node in ("node1", "node2"):
        (root / node).mkdir(parents=True)
        (root / node / "server.log").write_bytes(OLD.replace(b"TP0", node.encode()))
    (root / "top.log").write_bytes(OLD)
    return root


@pytest.mark.parametrize("form", ["directory", "glob", "recursive glob"])
def test_output_directory_mirrors_the_paths_below_the_directory_or_the_pattern(tmp_path: Path, form: str) -> None:
    root = fleet(tmp_path)
    named = {"directory": f"{root}/", "glob": f"{root}/node*/server.log", "recursive glob": f"{root}/**/*.log"}[form]
    out = tmp_path / "out"
    done = commands.migrate(named, output=f"{out}/", jobs=2)
    assert done.exit_status == 0, done.problems
    expected = ["node1/server.log", "node2/server.log"] + ([] if form == "glob" else ["top.log"])
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == expected
    for relative in expected:
        assert (out / relative).read_bytes() == migrated_whole(root / relative)


def migrated_whole(path: Path) -> bytes:
    out = io.BytesIO()
    commands.migrate(path, stdout=out)
    return out.getvalue()


def test_two_named_files_of_one_name_are_refused_naming_both(tmp_path: Path) -> None:
    root = fleet(tmp_path)
    first, second = root / "node1" / "server.log", root / "node2" / "server.log"
    with pytest.raises(PlanError, match="would both be written") as refused:
        commands.migrate([first, second], output=tmp_path / "out")
    assert str(first) in str(refused.value) and str(second) in str(refused.value)
    assert not (tmp_path / "out").exists()


# -- 30.11: validate takes what every command takes ------------------------------------------------------


def test_validate_takes_a_directory_and_a_quoted_glob_as_migrate_does(tmp_path: Path) -> None:
    events = events_of(migrated_events(CORPUS / "gen2_2025.log"))
    logs = tmp_path / "events"
    (logs / "deeper").mkdir(parents=True)
    (logs / "a.jsonl").write_bytes(b"".join(line + b"\n" for line in events))
    (logs / "deeper" / "b.jsonl").write_bytes(b"".join(line + b"\n" for line in events) + b"not json\n")
    walked = commands.validate(logs)
    assert (walked.exit_status, walked.counts.events, walked.input_failures) == (1, 2 * len(events), ())
    assert [(f.file, f.line) for f in walked.findings] == [(str(logs / "deeper" / "b.jsonl"), len(events) + 1)]
    matched = commands.validate(f"{logs}/*.jsonl")
    assert (matched.exit_status, matched.counts.events) == (0, len(events))


# -- 35.11: a file named twice is read once -------------------------------------------------------------


def test_a_file_named_twice_is_read_once_by_every_command(logs: Path, tmp_path: Path) -> None:
    log = logs / "server.log"
    log.write_bytes((CORPUS / "postcapture_before_fix_2026_07.log").read_bytes())  # VA printed as allocated
    os.link(log, tmp_path / "hardlink.log")
    (tmp_path / "symlink.log").symlink_to(log)
    names = [logs, f"{logs}/*.log", log, f"{logs}/./server.log", tmp_path / "hardlink.log", tmp_path / "symlink.log"]
    notices: list[str] = []
    once = commands.summarize(log, stdout=io.BytesIO())
    twice = commands.summarize(names, stdout=io.BytesIO(), on_notice=notices.append)
    assert (twice.summary, twice.events) == (once.summary, once.events)
    assert twice.summary.total("printed_allocated_va_bytes") == once.summary.total("printed_allocated_va_bytes") > 0
    assert notices == [
        f"5 name(s) of a file named already, each file read once: {logs}/server.log (is {logs}/server.log), "
        f"{logs}/server.log (is {logs}/server.log), {logs}/./server.log (is {logs}/server.log), ..."
    ]
    assert migrated_events(*names) == migrated_events(log)
    assert (
        commands.validate(names, on_finding=lambda _: None).counts
        == commands.validate(log, on_finding=lambda _: None).counts
    )
