"""The console contract of every command (issue 30 items 6, 12, 13).

What a user's shell sees: exit statuses, the one line each message takes on standard error (in process,
``cli_harness``), and, through a real shell, a pipe closed by its reader and the docs' own command
lines; an Examples section in every ``--help``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import orjson
import pytest
from cli_harness import kvlog_text as kvlog
from click.testing import CliRunner
from docs_helpers import blocks, page

from kvlog.cli import main

CORPUS = Path(__file__).resolve().parent / "corpus"
BIN = Path(sys.executable).parent
POOL = "[2025-03-27 21:33:31 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB"
LOAD = "[2025-03-27 21:33:30 TP0] Load weight begin. avail mem=139.06 GB"


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as a user's bash runs it, with this kvlog first on the PATH; ``PIPESTATUS`` on the last line."""
    environment = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", f'{command}; echo "status ${{PIPESTATUS[*]}}" >&2'],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# -- 30.12: the migrate page's line gives a file kvlog validate accepts ------------------------------


def docs_migrate_line() -> str:
    """The first command line of docs/migrate.md's examples: the one a reader copies."""
    first = blocks(page("docs/migrate.md"), "console")[0].splitlines()[0]
    return first.removeprefix("$ ").partition("  #")[0].strip()


def test_the_docs_migrate_line_writes_json_lines_that_validate_accepts(tmp_path: Path) -> None:
    line = docs_migrate_line()
    assert line == "kvlog migrate --only-events server.log > server.jsonl"
    shutil.copy(CORPUS / "postcapture_before_fix_2026_07.log", tmp_path / "server.log")
    migrated = shell(line, tmp_path)
    assert migrated.stderr.endswith("status 0\n"), migrated.stderr
    validated = shell("kvlog validate server.jsonl", tmp_path)
    assert validated.stderr.endswith("status 0\n"), validated.stderr
    assert validated.stderr.startswith(
        f"{len((tmp_path / 'server.jsonl').read_bytes().splitlines())} events, 0 invalid"
    )


def test_the_default_output_is_the_log_migrated_as_the_docs_say(tmp_path: Path) -> None:
    """Every line kept (a mixed log, validate reads it with --skip-non-json), as docs/migrate.md's second line says."""
    log = tmp_path / "server.log"
    log.write_text(f"request 1\n{POOL}\nrequest 2\n")
    migrated = shell("kvlog migrate server.log > server.migrated.log", tmp_path)
    assert migrated.stderr.endswith("status 0\n")
    lines = (tmp_path / "server.migrated.log").read_text().splitlines()
    assert lines[0] == "request 1" and lines[2] == "request 2"
    assert orjson.loads(lines[1])["event"] == "kv_pool.allocation"
    assert shell("kvlog validate --skip-non-json server.migrated.log", tmp_path).stderr.endswith("status 0\n")


# -- 30.13: a closed pipe ends the run quietly, with the shells' status ---------------------------------


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.log"
    path.write_text(f"{LOAD}\n" + "".join(f"{POOL}\nrequest {i}\n" for i in range(60_000)))
    shutil.copyfile(path, path.with_name("big-rank1.log"))  # a second file: one named twice is read once
    return path


@pytest.mark.parametrize(
    "command",
    [
        "kvlog migrate {log} | head -1",
        "kvlog migrate {log} {log.parent}/big-rank1.log --jobs 2 | head -1",
        "kvlog migrate --only-events {log} --report {tmp}/report.json --dead-letter {tmp}/dead.jsonl | head -c 10",
        "kvlog migrate --format text {log} - < {log} | head -1",
    ],
)
def test_a_pipe_its_reader_closed_ends_the_run_quietly_with_141(command: str, big_log: Path, tmp_path: Path) -> None:
    done = shell(command.format(log=big_log, tmp=tmp_path), tmp_path)
    *said, status = done.stderr.splitlines()
    assert status.split()[1] == "141", done.stderr
    assert said == [], said  # no "Broken pipe", no summary claiming a run that did not finish
    assert done.stdout  # what the reader took
    assert not list(tmp_path.glob("*.kvlog-tmp")) and not (tmp_path / "report.json").exists()


def test_validate_findings_into_a_closed_pipe_end_quietly(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text("not json\n" * 200_000)
    done = shell("kvlog validate bad.jsonl | head -1", tmp_path)
    *said, status = done.stderr.splitlines()
    assert (status, said) == ("status 141 0", [])
    assert done.stdout.startswith("bad.jsonl:1: ?@?: $: not a JSON event: ")


# -- 30.6 and 30.13: --strict names the lines, and points to the dead letters --------------------------


def test_strict_names_the_first_lines_and_points_to_the_dead_letters(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    padded = POOL + " " * (50 << 20)
    log.write_text(f"{LOAD}\n{padded}\n[2025-03-27 21:33:32 TP0] KV Cache is allocated. new words: 3 GB\n")
    done = kvlog("migrate", "--strict", "--only-events", log, cwd=tmp_path)
    assert done.returncode == 1
    summary, strict = done.stderr.splitlines()
    assert summary.endswith(", 2 memory-like lines unparsed (1 too long to read)")
    assert strict == (
        f"kvlog migrate: --strict: 2 line(s) left unparsed or not migrated; the first: {log}:2: a line of "
        f"{len(padded) + 1} bytes, over the 64 KiB a memory line may take: not read; {log}:3: looks like a memory "
        "line but matches no known sglang wording; --dead-letter FILE lists all 2, with why"
    )
    dead = tmp_path / "dead.jsonl"
    done = kvlog("migrate", "--strict", "--only-events", log, "--dead-letter", dead, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.splitlines()[1].endswith(f"; all 2 are in {dead}")
    letters = [orjson.loads(line) for line in dead.read_bytes().splitlines()]
    assert [(letter["line"], letter.get("length")) for letter in letters] == [(2, len(padded) + 1), (3, None)]


def test_dead_letters_quote_bytes_that_are_not_utf8_escaped_never_replaced(tmp_path: Path) -> None:
    """README: ``\\xff`` for a byte that is not UTF-8, in the line and in the file's name."""
    log = tmp_path / os.fsdecode(b"srv\xfe.log")
    log.write_bytes(b"[2025-03-27 21:33:32 TP0] weird mem=3 GB \xff\n")
    dead = tmp_path / "dead.jsonl"
    done = kvlog("migrate", "--strict", log, "--dead-letter", dead, "-o", tmp_path / "out.log")
    assert done.returncode == 1, done.stderr
    (letter,) = [orjson.loads(line) for line in dead.read_bytes().splitlines()]
    assert letter["text"] == "[2025-03-27 21:33:32 TP0] weird mem=3 GB \\xff"
    assert letter["file"] == f"{tmp_path}/srv\\xfe.log"
    assert "Traceback" not in done.stderr and "\ufffd" not in dead.read_text()


# -- 30.13: what a command says when there is nothing to read ------------------------------------------


def test_summarize_of_inputs_none_can_be_read_prints_no_table(tmp_path: Path) -> None:
    done = kvlog("summarize", "missing.log", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "kvlog summarize: missing.log: cannot open: No such file or directory\n"


def test_summarize_still_tabulates_the_inputs_it_can_read(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(f"{LOAD}\n{POOL}\n")
    done = kvlog("summarize", "missing.log", "server.log", cwd=tmp_path)
    assert done.returncode == 2 and "total" in done.stdout


def test_follow_says_it_waits_for_a_file_that_is_not_there(tmp_path: Path) -> None:
    follower = subprocess.Popen(
        [sys.executable, "-m", "kvlog", "follow", "missing.log", "logs/*.log"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert follower.stderr is not None
    said = [follower.stderr.readline(), follower.stderr.readline()]
    follower.send_signal(signal.SIGTERM)
    follower.communicate(timeout=60)
    assert said == [
        "kvlog follow: missing.log: no file there yet: waiting for one to appear (Ctrl-C stops)\n",
        "kvlog follow: logs/*.log: no file there yet: waiting for one to appear (Ctrl-C stops)\n",
    ]
    assert follower.returncode in (0, 143)  # stopped while following (0), or as it was still starting


def test_follow_into_a_closed_pipe_ends_quietly_with_141(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text("".join(f"{LOAD}\n" for _ in range(100_000)))
    started = time.monotonic()
    done = shell("kvlog follow server.log | head -1", tmp_path)
    *said, status = done.stderr.splitlines()
    assert (status, said) == ("status 141 0", [])
    assert time.monotonic() - started < 120  # it stopped by itself, no signal sent


# -- 30.13: one error prefix -----------------------------------------------------------------------------


def test_schema_show_errors_have_the_prefix_and_a_did_you_mean() -> None:
    done = kvlog("schema", "show", "kv_pool.alocation")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "kvlog schema show: unknown event 'kv_pool.alocation'; did you mean kv_pool.allocation?\n"
    done = kvlog("schema", "show", "zzz")
    assert done.stderr == "kvlog schema show: unknown event 'zzz'; kvlog schema list names them all\n"


# -- 30.13: every command's --help ends with examples --------------------------------------------------


def every_command(group: click.Group, context: click.Context, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [prefix]
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            found += every_command(command, context, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


COMMANDS = every_command(main, click.Context(main))


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) or "kvlog" for c in COMMANDS])
def test_every_commands_help_ends_with_examples_of_itself(command: tuple[str, ...]) -> None:
    done = CliRunner().invoke(main, [*command, "--help"])
    assert done.exit_code == 0, done.output
    examples = done.output.partition("Examples:\n")[2]
    shown = [line.strip() for line in examples.splitlines() if line.strip()]
    assert shown, f"kvlog {' '.join(command)} --help has no Examples section"
    assert all(f"kvlog {' '.join(command)}".strip() in line for line in shown), shown  # each uses the command


def test_the_help_lists_every_registered_command() -> None:
    assert {c[0] for c in COMMANDS if c} >= {"migrate", "validate", "follow", "summarize", "schema", "demo"}
