"""``kvlog.commands``: the rules of migrate, validate and check, tested by calling the functions.

Each command's console contract (exact output, exit status) has a few end-to-end subprocess tests in
its own test file; every rule of what a run may do is tested here, in process, with real files.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from migration_helpers import broken_migrations

from kvlog import commands
from kvlog.check.errors import ConfigError
from kvlog.cli.check import check as check_command
from kvlog.cli.failing import flags
from kvlog.cli.migrate import migrate as migrate_command
from kvlog.cli.validate import validate as validate_command
from kvlog.errors import KvlogError, OptionError
from kvlog.io.errors import InputError, OutputError
from kvlog.migration.errors import PlanError

CORPUS = Path(__file__).parent / "corpus"
OLD = (CORPUS / "gen2_2025.log").read_bytes()
MAMBA_HOST = b"[2026-03-11 02:10:41 TP0] Allocating 9.66 GB host memory for hierarchical Mamba cache\n"
GOOD = (
    '{"event":"kv_arena.closed","schema_version":1,"timestamp":"2025-01-01T00:00:00Z","level":"info",'
    '"arena_id":"1_0","released_bytes":0}'
)
BAD = GOOD.replace('"released_bytes":0', '"released_bytes":-1')
MIGRATE_FLAGS = flags(migrate_command)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "app.log"
    path.write_bytes(OLD)
    return path


def files_in(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def migrated(*inputs: str | Path, **options: object) -> bytes:
    out = io.BytesIO()
    outcome = commands.migrate(inputs, stdout=out, **options)  # type: ignore[arg-type]
    assert outcome.exit_status == commands.EXIT_OK, outcome.problems
    return out.getvalue()


# -- the exit statuses are named once, as README documents them ------------------------------------------


def test_exit_statuses_are_the_documented_ones() -> None:
    assert (commands.EXIT_OK, commands.EXIT_FINDINGS, commands.EXIT_ERROR, commands.EXIT_BROKEN_MIGRATIONS) == (
        0,
        1,
        2,
        3,
    )
    assert commands.exit_status_of(OptionError("x")) == 2
    assert commands.exit_status_of(commands.BrokenMigrations("x")) == 3


def test_importing_the_package_loads_no_command_and_validate_loads_no_other() -> None:
    code = (
        "import sys, kvlog.commands; "
        "heavy = lambda: sorted(m for m in sys.modules if m.startswith(('kvlog.migration', 'kvlog.check', "
        "'kvlog.file_validation', 'kvlog.memory'))); "
        "print(heavy()); kvlog.commands.validate('/dev/null'); print(heavy())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.splitlines() == ["[]", "['kvlog.file_validation']"]


# -- migrate: options ----------------------------------------------------------------------------------

#: keyword arguments -> the message, as the CLI words it
OPTION_CONFLICTS: list[tuple[dict[str, object], str]] = [
    (
        {"output_format": "text", "to_catalog": 1},
        "--to chooses the catalog version of JSON events: it needs --format jsonl",
    ),
    (
        {"legacy_generation": "sglang-text/2025-06"},
        "--legacy-generation chooses an old wording: it needs --format legacy",
    ),
    ({"in_place": True, "output": "x"}, "--in-place and -o exclude each other"),
    ({"in_place": True, "backup_suffix": ""}, "--in-place keeps a backup beside each file: --backup-suffix must be"),
    ({"in_place": True, "backup_suffix": "/x"}, "--in-place keeps a backup beside each file: --backup-suffix must be"),
    ({"to_catalog": 7}, "--to 7: catalog versions are 1..2"),
    ({"to_catalog": 0}, "--to 0: catalog versions are 1..2"),
    (
        {"output_format": "legacy", "legacy_generation": "sglang-text/1999-01"},
        "unknown legacy generation 'sglang-text/1999-01' (known: ",
    ),
    ({"allow_unparsed": ["fine", "["]}, "--allow-unparsed '[': not a regular expression: "),
    ({"jobs": 0}, "-j 0: at least one worker is needed"),
    ({"output_format": "yaml"}, "--format 'yaml': expected one of jsonl, text, legacy"),
]


@pytest.mark.parametrize(("options", "worded"), OPTION_CONFLICTS, ids=[w[:40] for _, w in OPTION_CONFLICTS])
def test_options_that_conflict_are_refused_before_anything_is_touched(
    tmp_path: Path, log: Path, options: dict[str, object], worded: str
) -> None:
    before = files_in(tmp_path)
    with pytest.raises(OptionError) as raised:
        commands.migrate([log, CORPUS / "gen1_early_2025.log"], **{"jobs": 2, **options})  # type: ignore[arg-type]
    assert raised.value.worded(MIGRATE_FLAGS).startswith(worded)
    assert "--" not in str(raised.value), "the library names options by their keyword arguments"
    assert commands.exit_status_of(raised.value) == commands.EXIT_ERROR
    assert files_in(tmp_path) == before


def test_in_place_cannot_replace_standard_input() -> None:
    with pytest.raises(PlanError) as raised:
        commands.migrate("-", in_place=True)
    assert str(raised.value) == "in_place cannot replace standard input"
    assert raised.value.worded(MIGRATE_FLAGS) == "--in-place cannot replace standard input"


def test_patterns_from_a_file_are_named_by_file_and_line(tmp_path: Path, log: Path) -> None:
    patterns = tmp_path / "accepted.txt"
    patterns.write_text("# a comment\nfine\n\n(unclosed\n")
    with pytest.raises(PlanError, match=rf"^{re.escape(str(patterns))}:4: not a regular expression"):
        commands.migrate(log, allow_unparsed_from=[patterns])
    with pytest.raises(InputError, match="cannot read the patterns"):
        commands.migrate(log, allow_unparsed_from=[tmp_path / "missing.txt"])


# -- migrate: no output over an input, no two outputs in one file -------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "worded"),
    [
        ({"report": "{input}"}, "--report {input} is the input {input}; it would be overwritten"),
        ({"dead_letter": "{input}"}, "--dead-letter {input} is the input {input}; it would be overwritten"),
        ({"dry_run": True, "report": "{input}"}, "--report {input} is the input"),
        ({"dry_run": True, "dead_letter": "{input}"}, "--dead-letter {input} is the input"),
        ({"in_place": True, "report": "{input}"}, "--report {input} is the input"),
        ({"in_place": True, "dead_letter": "{second}"}, "--dead-letter {second} is the input {second}"),
        ({"in_place": True, "report": "{input}.orig"}, "--report {input}.orig and the backup of {input} {input}.orig"),
        ({"output": "{out}", "report": "{second}"}, "--report {second} is the input"),
        ({"report": "{link}"}, "--report {link} is the input {input}"),
        ({"dead_letter": "{hardlink}"}, "--dead-letter {hardlink} is the input {input}"),
        ({"report": "{dir}/../logs/app.log"}, "--report {dir}/../logs/app.log is the input {input}"),
        ({"output": "{out}", "report": "{out}"}, "--report {out} and -o {out} are the same file"),
        ({"output": "{out}", "dead_letter": "{out}"}, "--dead-letter {out} and -o {out} are the same file"),
        ({"report": "{tmp}/r.json", "dead_letter": "{tmp}/r.json"}, "--dead-letter {tmp}/r.json and --report"),
        ({"report": "{tmp}/r.json", "dead_letter": "{tmp}/link-to-r.json"}, "are the same file"),
        ({"output": "{outdir}/", "report": "{outdir}/app.log"}, "--report {outdir}/app.log and -o {outdir}/app.log"),
        ({"output": "{out}", "report": "{tmp}"}, "--report {tmp} is a directory; name a file"),
        ({"dead_letter": "{dir}"}, "--dead-letter {dir} is a directory; name a file"),
        (
            {"output": "{input}"},
            "-o {input} is the input {input}; it would be overwritten: use --in-place to replace it",
        ),
    ],
)
def test_an_output_that_names_an_input_or_another_output_is_refused(
    tmp_path: Path, arguments: dict[str, object], worded: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log, second = logs / "app.log", logs / "second.log"
    log.write_bytes(OLD)
    second.write_bytes(OLD + MAMBA_HOST)
    (tmp_path / "link.log").symlink_to(log)
    os.link(log, tmp_path / "hardlink.log")
    (tmp_path / "r.json").write_bytes(b"{}\n")
    (tmp_path / "link-to-r.json").symlink_to(tmp_path / "r.json")
    names = {
        "input": str(log),
        "second": str(second),
        "out": str(tmp_path / "out.jsonl"),
        "outdir": str(tmp_path / "outdir"),
        "link": str(tmp_path / "link.log"),
        "hardlink": str(tmp_path / "hardlink.log"),
        "dir": str(logs),
        "tmp": str(tmp_path),
    }
    options = {k: v.format(**names) if isinstance(v, str) else v for k, v in arguments.items()}
    inputs = [log] if options.get("output") == str(log) else [log, second]
    before = files_in(tmp_path)
    with pytest.raises(PlanError) as raised:
        commands.migrate(inputs, **options)  # type: ignore[arg-type]
    assert worded.format(**names) in raised.value.worded(MIGRATE_FLAGS)
    assert files_in(tmp_path) == before, "an input or an existing file was changed, or an output written"


def test_two_inputs_of_one_name_cannot_share_an_output_directory(tmp_path: Path) -> None:
    for part in ("a", "b"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "app.log").write_bytes(OLD)
    out = tmp_path / "out"
    a, b = tmp_path / "a" / "app.log", tmp_path / "b" / "app.log"
    with pytest.raises(PlanError) as raised:
        commands.migrate([a, b], output=out)
    assert raised.value.worded(MIGRATE_FLAGS) == f"-o {out}: {a} and {b} would both be written to {out / 'app.log'}"
    assert str(raised.value) == f"output {out}: {a} and {b} would both be written to {out / 'app.log'}"
    assert not out.exists()


# -- migrate: outcomes -------------------------------------------------------------------------------------


def test_a_run_returns_its_counts_and_writes_its_report(tmp_path: Path, log: Path) -> None:
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    outcome = commands.migrate(log, output=out, report=report)
    assert outcome.exit_status == commands.EXIT_OK
    assert outcome.problems == () and outcome.notes == {} and outcome.skipped_links == ()
    assert outcome.report.files == 1 and outcome.report.events > 0
    assert json.loads(report.read_text()) == outcome.report.to_json()
    assert outcome.status_line == outcome.report.status_line()
    assert out.read_bytes() == migrated(log)


def test_events_go_to_the_stream_given_and_nothing_else_is_written(tmp_path: Path, log: Path) -> None:
    before = files_in(tmp_path)
    stream = io.BytesIO()
    notices: list[str] = []
    outcome = commands.migrate(str(log), stdout=stream, on_notice=notices.append)
    assert outcome.exit_status == commands.EXIT_OK and notices == []
    assert stream.getvalue().count(b"\n") == OLD.count(b"\n")
    assert b'"event":"kv_pool.allocation"' in stream.getvalue()
    assert files_in(tmp_path) == before


def test_with_standard_output_closed_a_run_that_writes_there_is_an_output_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, log: Path
) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    with pytest.raises(OutputError, match="standard output: cannot write: standard output is closed"):
        commands.migrate(log)
    assert commands.migrate(log, output=tmp_path / "out.jsonl").exit_status == commands.EXIT_OK


def test_dry_run_writes_nothing_but_the_report(tmp_path: Path, log: Path) -> None:
    before = log.stat().st_mtime_ns
    outcome = commands.migrate(log, dry_run=True, in_place=True, report=tmp_path / "report.json")
    assert outcome.exit_status == commands.EXIT_OK
    assert log.read_bytes() == OLD and log.stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.log", "report.json"]
    assert json.loads((tmp_path / "report.json").read_text())["events"] == outcome.report.events > 0


def test_strict_fails_on_an_unparsed_memory_line_unless_it_is_allowed(tmp_path: Path, log: Path) -> None:
    log.write_bytes(OLD + MAMBA_HOST)
    dead = tmp_path / "dead.jsonl"
    lenient = commands.migrate(log, output=tmp_path / "a", dead_letter=dead)
    assert lenient.exit_status == commands.EXIT_OK and lenient.report.unparsed_memory_lines == 1
    assert [json.loads(line)["line"] for line in dead.read_text().splitlines()] == [OLD.count(b"\n") + 1]
    strict = commands.migrate(log, output=tmp_path / "b", strict=True)
    assert strict.exit_status == commands.EXIT_FINDINGS
    allowed = commands.migrate(log, output=tmp_path / "c", strict=True, allow_unparsed=["hierarchical Mamba"])
    assert allowed.exit_status == commands.EXIT_OK
    assert allowed.report.allowed_unparsed_lines == 1 and allowed.report.unparsed_memory_lines == 0
    assert "(and 1 allowed by allow_unparsed)" in allowed.status_line


def test_the_text_of_a_run_spells_options_as_its_caller_does(tmp_path: Path) -> None:
    """No library text names a flag: a caller's ``option_names`` spell the options, the keyword otherwise."""
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    (tmp_path / "app.log.orig").write_bytes(b"the only copy of an earlier original\n")
    spelled = {"backup_suffix": "--backup-suffix", "allow_unparsed": "--allow-unparsed"}
    as_keywords = commands.migrate(log, in_place=True)
    as_flags = commands.migrate(log, in_place=True, option_names=spelled)
    assert as_keywords.problems[0].endswith("name a new backup with backup_suffix")
    assert as_flags.problems[0].endswith("name a new backup with --backup-suffix")
    log.write_bytes(OLD + MAMBA_HOST)
    allowed = commands.migrate(log, dry_run=True, allow_unparsed=["hierarchical Mamba"], option_names=spelled)
    assert allowed.status_line.endswith("(and 1 allowed by --allow-unparsed)")


def test_an_input_that_cannot_be_read_is_named_and_the_rest_is_migrated(tmp_path: Path, log: Path) -> None:
    corrupt = tmp_path / "broken.log.gz"
    corrupt.write_bytes(gzip.compress(OLD)[:200])
    missing = tmp_path / "missing.log"
    out = tmp_path / "out"
    notices: list[str] = []
    outcome = commands.migrate(
        [missing, corrupt, log, str(tmp_path / "nothing_*.log")], output=out, on_notice=notices.append
    )
    assert outcome.exit_status == commands.EXIT_ERROR
    assert list(outcome.problems) == notices
    assert notices[0] == f"{tmp_path / 'nothing_*.log'}: no file matches this pattern", "expansion first"
    assert notices[1].startswith(f"{missing}: cannot open")
    assert notices[2].startswith(f"{corrupt}: cannot read after ") and "(after line " in notices[2]
    assert outcome.report.files == 1
    assert (out / log.name).read_bytes() == migrated(log)
    assert not (out / corrupt.name).exists()


def test_broken_migrations_stop_the_run_before_anything_is_written(tmp_path: Path, log: Path) -> None:
    root = broken_migrations(tmp_path)
    with pytest.raises(commands.BrokenMigrations, match="unknown op 'renam'") as raised:
        commands.migrate(log, migrations=root, output=tmp_path / "out.jsonl", dead_letter=tmp_path / "dead.jsonl")
    assert commands.exit_status_of(raised.value) == commands.EXIT_BROKEN_MIGRATIONS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.log", "migrations"]


def test_a_report_that_cannot_be_written_is_an_output_error(tmp_path: Path, log: Path) -> None:
    with pytest.raises(OutputError, match=r"^cannot write the report: "):
        commands.migrate(log, output=tmp_path / "out.jsonl", report=tmp_path / "missing" / "report.json")


def test_jobs_give_the_same_result(tmp_path: Path) -> None:
    inputs = sorted(CORPUS.glob("*.log"))
    results = []
    for jobs in (1, 2):
        stream = io.BytesIO()
        dead, report = tmp_path / f"dead{jobs}", tmp_path / f"report{jobs}"
        outcome = commands.migrate(inputs, jobs=jobs, stdout=stream, dead_letter=dead, report=report)
        assert outcome.exit_status == commands.EXIT_OK
        results.append((stream.getvalue(), dead.read_bytes(), report.read_bytes()))
    assert results[0] == results[1]
    assert results[0][0] == b"".join(migrated(p) for p in inputs)


def test_a_second_in_place_run_says_already_current_and_keeps_the_backup(tmp_path: Path, log: Path) -> None:
    first = commands.migrate(log, in_place=True)
    assert first.exit_status == commands.EXIT_OK and first.notes == {"replaced": 1}
    assert first.status_line.endswith("; 1 replaced")
    migrated_once = log.read_bytes()
    notices: list[str] = []
    again = commands.migrate(log, in_place=True, on_notice=notices.append)
    assert again.exit_status == commands.EXIT_OK
    assert notices == [f"{log}: already current, unchanged"]
    assert again.notes == {"already current": 1} and "; 1 already current" in again.status_line
    assert log.read_bytes() == migrated_once and (tmp_path / "app.log.orig").read_bytes() == OLD


def test_links_met_in_a_directory_are_skipped_by_in_place_and_listed(tmp_path: Path) -> None:
    logs, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    logs.mkdir()
    elsewhere.mkdir()
    (elsewhere / "b.log").write_bytes(OLD)
    (logs / "a.log").symlink_to(elsewhere / "b.log")
    (logs / "real.log").write_bytes(OLD)
    outcome = commands.migrate(logs, in_place=True)
    assert outcome.exit_status == commands.EXIT_OK
    assert outcome.skipped_links == (str(logs / "a.log"),)
    assert f"1 symbolic link(s) skipped, not replaced ({logs / 'a.log'})" in outcome.status_line
    assert (elsewhere / "b.log").read_bytes() == OLD and b'"event"' in (logs / "real.log").read_bytes()


# -- validate ------------------------------------------------------------------------------------------------


def test_validate_collects_findings_without_a_callback_and_streams_them_with_one(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text(f"{GOOD}\n{BAD}\nnot json\n")
    kept = commands.validate(log)
    assert kept.exit_status == commands.EXIT_FINDINGS
    assert [f.line for f in kept.findings] == [2, 3]
    assert str(kept.findings[0]) == f"{log}:2: kv_arena.closed@1: $.released_bytes: -1 is less than the minimum of 0"
    assert str(kept.counts) == "2 events, 1 invalid, 1 non-JSON lines, 0 skipped, 2 problems"
    streamed: list[object] = []
    outcome = commands.validate([log], on_finding=streamed.append)
    assert outcome.findings == () and streamed == list(kept.findings)
    assert commands.validate(log, skip_non_json=True).counts.skipped_lines == 1


def test_validate_of_valid_logs_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl.gz"
    log.write_bytes(gzip.compress(f"{GOOD}\n".encode() * 3))
    second = tmp_path / "b.jsonl"
    second.write_bytes(f"{GOOD}\n".encode() * 3)
    outcome = commands.validate([log, second])
    assert (outcome.exit_status, outcome.counts.events, outcome.input_failures) == (commands.EXIT_OK, 6, ())


def test_an_unreadable_input_is_a_failure_and_the_others_are_still_validated(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f"{BAD}\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    failures: list[commands.InputFailure] = []
    outcome = commands.validate([tmp_path / "missing.jsonl", empty, bad], on_input_failure=failures.append)
    assert outcome.exit_status == commands.EXIT_ERROR, "an unreadable input wins over an invalid event"
    assert list(outcome.input_failures) == failures
    assert [str(f) for f in failures] == [  # what expansion finds is said before anything is read
        f"{empty}: no files in this directory",
        f"{tmp_path / 'missing.jsonl'}: cannot open: No such file or directory",
    ]
    assert [f.line for f in outcome.findings] == [1]


def test_a_closed_standard_input_is_an_input_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    outcome = commands.validate("-")
    assert outcome.exit_status == commands.EXIT_ERROR
    assert outcome.input_failures == (commands.InputFailure("-", "cannot read: standard input is closed"),)


def test_an_error_of_the_callback_is_its_own_not_the_inputs(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text(f"{BAD}\n{BAD}\n")

    def full_disk(_: object) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        commands.validate(log, on_finding=full_disk)


def test_input_failures_are_escaped_when_printed() -> None:
    assert str(commands.InputFailure("new\nline.jsonl", "cannot open: \x1b[31m")) == (
        "new\\nline.jsonl: cannot open: \\x1b[31m"
    )


def test_validate_refuses_no_workers() -> None:
    with pytest.raises(OptionError, match=r"^jobs 0: at least one worker is needed$"):
        commands.validate("-", jobs=0)


# -- check -------------------------------------------------------------------------------------------------


def test_check_of_kvlogs_own_catalog_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject here: kvlog's own catalog
    outcome = commands.check()
    assert outcome.exit_status == commands.EXIT_OK
    assert outcome.report.schema_files > 0 and outcome.report.skipped["KV2"]


def test_check_fails_on_an_error_finding(tmp_path: Path) -> None:
    (tmp_path / "schemas" / "kv_x.y").mkdir(parents=True)
    (tmp_path / "schemas" / "kv_x.y" / "v1.json").write_text("{")
    outcome = commands.check(tmp_path)
    assert outcome.exit_status == commands.EXIT_FINDINGS
    assert any(f.rule == "KV001" for f in outcome.report.findings)


def test_check_refuses_what_it_cannot_check(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        commands.check(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"holds neither schemas/ nor a pyproject\.toml"):
        commands.check(tmp_path)
    with pytest.raises(ConfigError, match="missing: not a directory"):
        commands.check(corpus=tmp_path / "missing")
    with pytest.raises(OptionError) as raised:
        commands.check(mode="sideways")
    assert raised.value.worded(flags(check_command)).startswith("--mode 'sideways': expected one of backward")


def test_check_against_a_ref_that_is_no_commit_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(OptionError) as raised:
        commands.check(against="no-such-ref")
    assert str(raised.value).startswith("against no-such-ref: not a commit in the repository holding ")
    assert raised.value.worded(flags(check_command)).startswith("--against no-such-ref: not a commit")


def test_check_against_without_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(OptionError) as raised:
        commands.check(against="HEAD")
    assert raised.value.worded(flags(check_command)) == "--against needs git, and git is not on PATH"


# -- the CLI only words and prints what the command decided --------------------------------------------------


def test_the_cli_names_options_by_their_flags() -> None:
    assert MIGRATE_FLAGS["output"] == "-o" and MIGRATE_FLAGS["in_place"] == "--in-place"
    assert MIGRATE_FLAGS["to_catalog"] == "--to" and MIGRATE_FLAGS["output_format"] == "--format"
    assert flags(validate_command)["jobs"] == "--jobs"
    result = CliRunner().invoke(migrate_command, ["-", "--in-place", "-o", "x"])
    assert (result.exit_code, result.output) == (2, "kvlog migrate: --in-place and -o exclude each other\n")


def test_every_error_a_command_raises_is_a_kvlog_error() -> None:
    for error in (commands.BrokenMigrations, PlanError, OptionError, ConfigError, InputError, OutputError):
        assert issubclass(error, KvlogError)
