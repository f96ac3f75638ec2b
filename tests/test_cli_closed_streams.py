"""``kvlog validate``, ``check`` and ``migrate`` started with standard input or output closed (``<&-``, ``>&-``).

Python then has ``sys.stdin`` / ``sys.stdout`` set to None; both commands once died with an
AttributeError traceback and exit 1, the code that means "findings".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EVENT = b'{"event":"kv_arena.commit","schema_version":1}\n'


def run_closed(fd: int, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m kvlog ARGS`` with descriptor ``fd`` closed in the child."""
    return subprocess.run(
        [sys.executable, "-m", "kvlog", *args],
        stdin=subprocess.DEVNULL if fd != 0 else None,
        stdout=subprocess.PIPE if fd != 1 else None,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(fd),
        check=False,
        timeout=120,
        cwd=cwd,
    )


def test_validate_with_standard_input_closed_is_an_input_error(tmp_path: Path) -> None:
    result = run_closed(0, "validate", "-", cwd=tmp_path)
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert b"standard input is closed" in result.stderr


@pytest.mark.parametrize("quiet", [False, True])
def test_validate_with_standard_output_closed_is_an_output_error(tmp_path: Path, quiet: bool) -> None:
    log = tmp_path / "a.jsonl"
    log.write_bytes(EVENT * 3)  # invalid events: findings to write
    result = run_closed(1, "validate", *(["-q"] if quiet else []), str(log))
    assert b"Traceback" not in result.stderr
    if quiet:  # nothing to write: the findings decide
        assert result.returncode == 1
    else:
        assert result.returncode == 2
        assert b"cannot write the findings: standard output is closed" in result.stderr


def test_migrate_with_standard_output_closed_is_an_output_error(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_bytes(b"[2025-03-27 21:33:31 TP0] KV Cache is allocated. #tokens: 1, K size: 1.00 GB, V size: 1.00 GB\n")
    result = run_closed(1, "migrate", str(log))
    assert result.returncode == 2
    assert result.stderr == b"kvlog migrate: standard output: cannot write: standard output is closed\n"
    assert run_closed(1, "migrate", str(log), "-o", str(tmp_path / "out.jsonl")).returncode == 0


def test_check_with_standard_output_closed_is_an_output_error() -> None:
    result = run_closed(1, "check")
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert b"cannot write the report: standard output is closed" in result.stderr


def test_check_into_a_closed_pipe_ends_quietly_as_sigpipe_would() -> None:
    """A reader gone is no output error: 141, as for ``cat`` (0 when the report fit in the pipe first)."""
    check = subprocess.Popen(
        [sys.executable, "-m", "kvlog", "check", "--format", "json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert check.stdout is not None
    check.stdout.close()  # the reader is gone before the report is written
    _, err = check.communicate(timeout=120)
    assert b"Traceback" not in err and b"cannot write" not in err
    assert check.returncode in {0, 141}
