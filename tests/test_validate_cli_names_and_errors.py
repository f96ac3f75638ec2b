"""``kvlog validate`` in the hands of a CI job and a new user (issue 9, items 18, 22 and 27).

- Names and log text never break a report's lines: a file name or an event name holding a newline,
  a carriage return or an escape sequence could plant a ``::error`` workflow command or rewrite a
  terminal; every output escapes them.
- Every read failure (permissions on the file or on a directory of its path, a directory, a link
  loop, an I/O error...) exits 2 naming the file and the real reason, and the other inputs still run.
- ``--skip-unknown-events`` lets a mixed log's other JSON events through, counted.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cli_harness
import pytest
from cli_harness import kvlog_process
from docs_helpers import blocks, console_session, page, run_console
from process_helpers import children
from test_cli_hostile_files import without_read_override

from kvlog import commands

ROOT = Path(__file__).resolve().parent.parent
GOOD = (
    '{"event":"kv_arena.closed","schema_version":1,"timestamp":"2025-01-01T00:00:00Z","level":"info",'
    '"arena_id":"1_0","released_bytes":0}'
)
BAD = GOOD.replace('"released_bytes":0', '"released_bytes":-1')
#: what a line of the text output may hold: printable characters only (no newline inside, no ESC, no CR)
PRINTABLE_LINE = re.compile(r"[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202e]*")


def kvlog(*args: str | bytes | Path, cwd: Path, preexec: bool = False) -> subprocess.CompletedProcess[bytes]:
    """``kvlog ARGS`` in process; a real process where files must be unreadable to root (``preexec``)."""
    if not (preexec and os.geteuid() == 0):
        return cli_harness.kvlog(*map(os.fsdecode, args), cwd=cwd)
    # root reads through modes: only a process whose bounding set lost the DAC capabilities cannot
    result = kvlog_process(*map(os.fsdecode, args), cwd=cwd, timeout=120, preexec_fn=without_read_override)
    if result.returncode == 99:
        pytest.skip("running as root without CAP_SETPCAP: cannot make a file unreadable to this process")
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
    return result


def lines_of(output: bytes) -> list[str]:
    text = output.decode("utf-8")  # strict: a name that is not UTF-8 was escaped, never printed raw
    lines = text.split("\n")
    assert lines[-1] == "", "the output ends with a newline"
    for line in lines[:-1]:
        assert PRINTABLE_LINE.fullmatch(line), f"a control character reached the output: {line!r}"
    return lines[:-1]


# -- names and log text are escaped ----------------------------------------------------------------

#: raw name -> how validate prints it
NAMES = {
    b"new\nline.jsonl": "new\\nline.jsonl",
    b"x\n::error file=a.py,line=1::pwned.jsonl": "x\\n::error file=a.py,line=1::pwned.jsonl",
    b"carriage\rreturn.jsonl": "carriage\\rreturn.jsonl",
    b"esc\x1b[31mred\x1b[0m.jsonl": "esc\\x1b[31mred\\x1b[0m.jsonl",
    b"tab\there.jsonl": "tab\\there.jsonl",
    b"latin1-\xff\xfe.jsonl": "latin1-\\xff\\xfe.jsonl",
    b"bell\x07.jsonl": "bell\\x07.jsonl",
    b"rtl\xe2\x80\xaegol.jsonl": "rtl\\u202egol.jsonl",
    b"::error::planted.jsonl": "./::error::planted.jsonl",
    b"back\\slash\n.jsonl": "back\\\\slash\\n.jsonl",
    "caf\u00e9.jsonl".encode(): "caf\u00e9.jsonl",
}


def test_file_names_are_escaped_in_findings_and_in_errors(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    for raw in NAMES:
        with open(os.path.join(root, raw), "wb") as log:  # a bytes name: not a Path
            log.write(f"{GOOD}\n{BAD}\n".encode())
    missing = [b"missing/" + raw for raw in NAMES]
    for jobs in ("1", "2"):
        result = kvlog("validate", "--jobs", jobs, *NAMES, *missing, cwd=tmp_path)
        assert result.returncode == 2
        findings = lines_of(result.stdout)
        assert [f.split(":2: kv_arena.closed@1: ")[0] for f in findings] == list(NAMES.values())
        errors = lines_of(result.stderr)
        patterns = [shown for raw, shown in NAMES.items() if b"[" in raw]  # expanded first, as every command does
        assert errors[:-1] == [
            f"kvlog validate: missing/{shown.removeprefix('./')}: no file matches this pattern" for shown in patterns
        ] + [
            f"kvlog validate: missing/{shown.removeprefix('./')}: cannot open: No such file or directory"
            for shown in NAMES.values()
            if shown not in patterns
        ]
        assert errors[-1].startswith(f"{2 * len(NAMES)} events, {len(NAMES)} invalid")
        assert not any(line.startswith("::") for line in findings + errors), "no line a CI runner takes for a command"


def test_text_from_the_log_is_escaped_too(tmp_path: Path) -> None:
    """Event names, versions, keys and values come from the log, and end up in findings."""
    hostile = [
        '{"event":"x\\n::error::name","schema_version":1}',
        '{"event":"kv_arena.closed","schema_version":"1\\r\\n::error::version"}',
        GOOD[:-1] + ',"bad\\nkey\\u001b[2J":1}',
        GOOD[:-1] + ',"ext":{"a":1},"\\u2028":1,"\\u202e":2}',
        "not json \x1b[31m with an escape",
    ]
    log = tmp_path / "hostile.jsonl"
    log.write_text("".join(line + "\n" for line in hostile))
    result = kvlog("validate", log.name, cwd=tmp_path)
    assert result.returncode == 1
    findings = lines_of(result.stdout)
    assert {int(f.split(":")[1]) for f in findings} == {1, 2, 3, 4, 5}
    assert all(f.startswith("hostile.jsonl:") for f in findings)
    assert "x\\n::error::name@1: $.event: unknown event 'x\\n::error::name'" in findings[0]
    assert "$.bad\\nkey\\x1b[2J: unknown field" in result.stdout.decode()


# -- read failures ---------------------------------------------------------------------------------


def unreadable_inputs(tmp_path: Path) -> dict[str, str]:
    """Inputs that cannot be read -> the reason validate must give (after 'NAME: ')."""
    (tmp_path / "noperm").mkdir()
    (tmp_path / "noperm" / "ok.jsonl").write_text(GOOD + "\n")
    (tmp_path / "noperm" / "ok.jsonl.gz").write_bytes(b"")
    (tmp_path / "noperm").chmod(0)  # not searchable: nothing below it can be opened
    (tmp_path / "secret.jsonl").write_text(GOOD + "\n" * 70_000)  # large enough to be split for --jobs 2
    (tmp_path / "secret.jsonl").chmod(0)
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "dir.jsonl.gz").mkdir()
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "file.jsonl").write_text(GOOD + "\n")
    return {
        "noperm/ok.jsonl": "cannot open: Permission denied",
        "noperm/ok.jsonl.gz": "cannot open: Permission denied",
        "secret.jsonl": "cannot open: Permission denied",
        "dir.jsonl": "no files in this directory",  # a directory is walked, as every command walks it
        "dir.jsonl.gz": "no files in this directory",
        "loop1": "cannot open: Too many levels of symbolic links",
        "file.jsonl/below": "cannot open: Not a directory",
        "/proc/self/mem": "Input/output error",  # a real EIO: reading a process's memory at address 0
        "missing.jsonl": "cannot open: No such file or directory",
    }


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_every_read_failure_exits_2_names_the_file_and_the_rest_runs(tmp_path: Path, jobs: str) -> None:
    cases = unreadable_inputs(tmp_path)
    (tmp_path / "first.jsonl").write_text(GOOD + "\n")
    (tmp_path / "last.jsonl").write_text(f"{GOOD}\n{BAD}\n")
    for name, reason in cases.items():
        result = kvlog("validate", "--jobs", jobs, "first.jsonl", name, "last.jsonl", cwd=tmp_path, preexec=True)
        assert result.returncode == 2, (name, result.stderr)
        errors = lines_of(result.stderr)
        assert errors[0].startswith(f"kvlog validate: {name}: ") and errors[0].endswith(reason), (name, errors)
        assert "cannot write" not in result.stderr.decode()
        assert errors[-1].startswith("3 events, 1 invalid"), "the inputs before and after are validated"
        assert lines_of(result.stdout) == [
            "last.jsonl:2: kv_arena.closed@1: $.released_bytes: -1 is less than the minimum of 0"
        ]
    every = kvlog("validate", "--jobs", jobs, "first.jsonl", *cases, "last.jsonl", cwd=tmp_path, preexec=True)
    assert every.returncode == 2
    listed = [name for name, reason in cases.items() if reason == "no files in this directory"]  # said first
    assert [line.split(": ")[1] for line in lines_of(every.stderr)[:-1]] == listed + [
        name for name in cases if name not in listed
    ]


# -- other loggers' JSON events --------------------------------------------------------------------

MIXED = [
    GOOD,
    '{"event": "request_done", "status": 200, "duration_ms": 12.5}',  # structlog's own events
    '{"msg": "GET /health", "level": 30, "pid": 7}',  # pino/bunyan: no "event" at all
    '{"event": 42}',
    "INFO: Started server process [4242]",
    BAD,  # a catalog event, invalid: always reported
    GOOD.replace('"schema_version":1', '"schema_version":9'),  # a catalog event at a version unknown here
    '{"event": "kv_arena.closd", "schema_version": 1}',  # a typo is an unknown event too: that is the option
]


def test_skip_unknown_events_skips_and_counts_json_that_is_no_catalog_event(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    log.write_text("".join(line + "\n" for line in MIXED))
    plain = commands.validate(log)
    assert plain.exit_status == 1
    assert [f.line for f in plain.findings] == [2, 3, 4, 5, 6, 7, 8]
    skipping = commands.validate(log, skip_unknown_events=True)
    assert skipping.exit_status == 1
    assert [str(f).split(": ", 2)[1:] for f in skipping.findings] == [
        ["?@?", "$: not a JSON event: unexpected character, expected a JSON value: line 1 column 1 (char 0)"],
        ["kv_arena.closed@1", "$.released_bytes: -1 is less than the minimum of 0"],
        ["kv_arena.closed@9", "$.schema_version: unknown version 9 of kv_arena.closed (known: 1)"],
    ]
    assert str(skipping.counts) == "3 events, 2 invalid, 1 non-JSON lines, 4 skipped (4 unknown events), 3 problems"
    both = commands.validate(log, skip_unknown_events=True, skip_non_json=True)
    assert str(both.counts) == "3 events, 2 invalid, 0 non-JSON lines, 5 skipped (4 unknown events), 2 problems"


def test_skip_unknown_events_gives_the_same_report_for_any_number_of_jobs(tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    log.write_text("".join(line + "\n" for line in MIXED) * 2000)
    reports = [commands.validate(log, skip_unknown_events=True, jobs=jobs) for jobs in (1, 2, 3)]
    assert len({(r.findings, str(r.counts)) for r in reports}) == 1
    assert str(reports[0].counts) == (
        "6000 events, 4000 invalid, 2000 non-JSON lines, 8000 skipped (8000 unknown events), 6000 problems"
    )


def test_the_docs_example_of_a_mixed_log_runs_as_written(tmp_path: Path) -> None:
    """docs/validate.md's console session that shows --skip-unknown-events, command by command."""
    session = next(block for block in blocks(page("docs/validate.md"), "console") if "--skip-unknown" in block)
    steps = console_session(session)
    assert len(steps) >= 3
    for command, expected in steps:
        assert run_console(command, tmp_path) == expected, command


# -- stopping a parallel run -----------------------------------------------------------------------


#: ``GOOD`` with one key escaped: as valid, and the native engine leaves every such line to the Python one
_GOOD_LEFT_TO_PYTHON = GOOD.replace('"arena_id"', '"\\u0061rena_id"')


def _start_parallel_run(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    """``validate --jobs 2`` of a 27 MB log, four times over, once its workers run: (the run, their pids).

    Each event names one key escaped (``\\u0061rena_id``), which the native engine leaves to the Python one:
    at a million events a second a worker it would be done before it could be stopped.
    """
    log = tmp_path / "big.jsonl"
    if not log.exists():
        log.write_text(f"{_GOOD_LEFT_TO_PYTHON}\n" * 200_000)
    run = subprocess.Popen(
        [sys.executable, "-m", "kvlog", "validate", "--jobs", "2", *[log.name] * 4],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, as a shell job or a CI step
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = children(run.pid)
        if len(workers) == 2:
            time.sleep(0.2)  # into the chunks
            return run, workers
        time.sleep(0.01)
    run.kill()
    pytest.fail("the workers never started")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("target", ["process group", "parent"])
def test_a_stop_signal_ends_a_parallel_run_and_its_workers(tmp_path: Path, signum: int, target: str) -> None:
    """Ctrl-C, a CI runner's SIGTERM to the process group, or a hang-up: 128 + N, never a hang.

    multiprocessing.Pool hung here: on SIGTERM to the group (workers killed while holding its
    queue's lock), and now and then at a normal end (its SIGTERM to a worker about to block).
    """
    for _ in range(3):
        run, workers = _start_parallel_run(tmp_path)
        (os.killpg if target == "process group" else os.kill)(run.pid, signum)
        try:
            _, errors = run.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            pytest.fail(f"validate hung after {signal.Signals(signum).name}")
        assert run.returncode == 128 + signum, errors
        assert b"Traceback" not in errors
        assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and _alive(pid)], "a worker was left"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_worker_killed_mid_run_is_an_error_naming_the_file(tmp_path: Path) -> None:
    run, _ = _start_parallel_run(tmp_path)
    killed = False
    while not killed and run.poll() is None:  # a file's workers end with it: kill one that still runs
        for pid in children(run.pid):
            try:
                os.kill(pid, signal.SIGKILL)  # what the OOM killer does
            except ProcessLookupError:
                continue
            killed = True
            break
    assert killed, "the run ended before a worker could be killed"
    _, errors = run.communicate(timeout=120)
    assert run.returncode == 2
    assert b"kvlog validate: big.jsonl: cannot validate: a worker process ended unexpectedly" in errors
    assert b"Traceback" not in errors


def test_a_stop_signal_that_a_gc_callback_swallows_still_stops_the_run() -> None:
    """SIGTERM can land inside a weakref callback, where Python prints "Exception ignored" and goes on."""
    import gc  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import weakref  # noqa: PLC0415

    from kvlog.io import stopping  # noqa: PLC0415

    handlers = {signum: signal.getsignal(signum) for signum in stopping.STOP_SIGNALS}
    hook = sys.unraisablehook
    try:
        stopping.stop_on_signals()

        class Held:
            pass

        held = Held()
        weakref.finalize(held, signal.raise_signal, signal.SIGTERM)
        del held
        gc.collect()
        assert stopping.swallowed() == signal.SIGTERM
    finally:
        stopping._swallowed.clear()
        sys.unraisablehook = hook
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
