"""``kvlog migrate`` and ``kvlog validate`` on hostile files: real files, real limits (a process
where a limit or a descriptor needs one).

Exit codes under test (documented in each command's --help): migrate 0 done, 1 --strict found
unparsed lines, 2 an input or output could not be read or written; validate 0 all valid, 1 some line
invalid, 2 an input could not be read. Whatever fails, the input is untouched, no output file is
half-written and no temporary file is left behind; stderr names the file and the reason, never a
traceback.
"""

from __future__ import annotations

import ctypes
import gzip
import os
import resource
import subprocess
import threading
from pathlib import Path
from typing import Any

import cli_harness
import orjson
import pytest
import zstandard
from cli_harness import PYTHON_M_KVLOG, kvlog_process

CORPUS = Path(__file__).parent / "corpus"
ALLOCATED = b"[2025-06-03 11:20:41 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB"
EVENT = (
    b'{"event":"kv_arena.closed","schema_version":1,"timestamp":"2025-01-01T00:00:00Z","level":"info",'
    b'"arena_id":"1_0","released_bytes":0}'
)


def kvlog(*args: str | Path, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    """``kvlog ARGS`` in process; a real process where ``kwargs`` need one (a limit in ``preexec_fn``, ``stdout``)."""
    if not kwargs:
        return cli_harness.kvlog(*args)
    return kvlog_process(*args, timeout=120, no_traceback=True, **kwargs)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") or "kvlog-tmp" in p.name)


def events_of(data: bytes) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in data.splitlines() if line.startswith(b"{")]


def test_an_empty_file_is_migrated_to_an_empty_file_and_is_valid(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    done = kvlog("migrate", empty, "-o", tmp_path / "out.jsonl")
    assert done.returncode == 0 and (tmp_path / "out.jsonl").read_bytes() == b""
    assert kvlog("validate", empty).returncode == 0


@pytest.mark.parametrize("ending", [b"", b"\n", b"\r\n"])
def test_line_endings_crlf_and_no_final_newline(tmp_path: Path, ending: bytes) -> None:
    """Other lines keep their exact bytes (a CR stays); the memory line becomes one event either way."""
    source = tmp_path / "in.log"
    content = b"hello\r\n" + b"plain line" + b"\n" + ALLOCATED + ending
    source.write_bytes(content)
    done = kvlog("migrate", source)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"hello\r\nplain line\n")
    (event,) = events_of(done.stdout)
    assert event["event"] == "kv_pool.allocation"
    assert done.stdout.endswith(b"}\n" if ending else b"}")  # an event line ends in LF, as JSON lines do
    assert source.read_bytes() == content
    jsonl = tmp_path / "events.jsonl"
    jsonl.write_bytes(EVENT + b"\r\n" + EVENT)
    assert kvlog("validate", jsonl).returncode == 0


def test_invalid_utf8_and_nul_bytes_pass_through_byte_for_byte_and_are_reported(tmp_path: Path) -> None:
    lines = [
        b"\xff\xfe\xfd binary junk\n",
        b"\x00\x00\x00\n",
        b"KV Cache is allocated. #tokens: 1\x002, K size: 1.00 GB, V size: 1.00 GB\n",
        ALLOCATED.replace(b"TP0", b"TP0\xc3\x28") + b"\n",
        ALLOCATED + b"\n",
    ]
    source = tmp_path / "in.log"
    source.write_bytes(b"".join(lines))
    done = kvlog("migrate", source, "--strict", "--dead-letter", tmp_path / "dead.jsonl")
    assert done.returncode == 1  # memory-like lines were left unparsed
    out = done.stdout.splitlines(keepends=True)
    assert out[:4] == lines[:4]
    assert orjson.loads(out[4])["event"] == "kv_pool.allocation"
    dead = [orjson.loads(line) for line in (tmp_path / "dead.jsonl").read_bytes().splitlines()]
    assert [record["line"] for record in dead] == [3, 4]
    checked = kvlog("validate", source)
    assert checked.returncode == 1
    reported = [line.split(b":")[1] for line in checked.stdout.splitlines()]
    assert reported == [b"1", b"2", b"3", b"4", b"5"]


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not compressed at all"])
def test_a_damaged_archive_is_a_clear_error_and_nothing_is_written_in_place(
    tmp_path: Path, damage: str, suffix: str
) -> None:
    source = tmp_path / f"in.log{suffix}"
    plain = (CORPUS / "gen2_2025.log").read_bytes() * 20
    whole = gzip.compress(plain) if suffix == ".gz" else zstandard.ZstdCompressor().compress(plain)
    if damage == "truncated":
        data = whole[: len(whole) // 2]
    elif damage == "corrupt":
        data = whole[:40] + bytes(b ^ 0x5A for b in whole[40:80]) + whole[80:]
    else:
        data = b"this is not gzip\n"
    source.write_bytes(data)
    source.chmod(0o640)
    for args in (["-o", tmp_path / f"out.jsonl{suffix}"], ["--in-place"]):
        done = kvlog("migrate", source, *args)
        assert done.returncode == 2
        assert source.name.encode() in done.stderr and b"cannot read" in done.stderr
        assert source.read_bytes() == data and source.stat().st_mode & 0o777 == 0o640
        assert sorted(p.name for p in tmp_path.iterdir()) == [source.name], "an output or backup was written"
    checked = kvlog("validate", source)
    assert checked.returncode == 2 and source.name.encode() + b": cannot read" in checked.stderr


def test_a_concatenation_of_zstd_frames_is_read_whole(tmp_path: Path) -> None:
    """As ``zstd -c a >> log.zst`` makes: every frame is read, none is mistaken for the end."""
    source = tmp_path / "in.jsonl.zst"
    source.write_bytes(b"".join(zstandard.ZstdCompressor().compress(EVENT + b"\n") for _ in range(3)))
    checked = kvlog("validate", source)
    assert checked.returncode == 0 and checked.stderr.startswith(b"3 events, 0 invalid")


def test_a_directory_as_input(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_bytes(ALLOCATED + b"\n")
    checked = kvlog("validate", tmp_path / "logs")  # walked as migrate walks it: the old line is no event
    assert checked.returncode == 1 and f"{tmp_path / 'logs' / 'a.log'}:1: ".encode() in checked.stdout
    done = kvlog("migrate", tmp_path / "logs", "-o", tmp_path / "out.jsonl")  # migrate walks a directory
    assert done.returncode == 0 and events_of((tmp_path / "out.jsonl").read_bytes())


def test_an_empty_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = kvlog("migrate", tmp_path / "empty", "-o", tmp_path / "out.jsonl")
    assert done.returncode == 2 and b"empty" in done.stderr


def test_a_fifo_is_read_as_a_stream(tmp_path: Path) -> None:
    for command in (["migrate"], ["validate"]):
        fifo = tmp_path / f"fifo-{command[0]}"
        os.mkfifo(fifo)
        payload = (ALLOCATED if command == ["migrate"] else EVENT) + b"\n"

        def feed(fifo: Path = fifo, payload: bytes = payload) -> None:
            with fifo.open("wb") as writer:
                writer.write(payload * 1000)

        writer = threading.Thread(target=feed, daemon=True)  # never keeps pytest from exiting
        writer.start()
        done = kvlog(*command, fifo)
        writer.join(timeout=30)
        assert done.returncode == 0, done.stderr
        if command == ["migrate"]:
            assert len(events_of(done.stdout)) == 1000


def test_in_place_refuses_a_fifo_instead_of_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    try:  # a hang is for ever: the bound only has to outlast a start-up on a loaded 2-core CI machine
        done = subprocess.run(
            [*PYTHON_M_KVLOG, "migrate", "--in-place", str(fifo)], capture_output=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("kvlog migrate --in-place on a FIFO hung")
    assert done.returncode == 2 and b"pipe.log" in done.stderr
    assert fifo.is_fifo()


def without_read_override() -> None:
    """Drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set before exec.

    CI runs as root, for whom permission bits do not block reads; without these two capabilities
    they do, even for uid 0 (the kernel derives root's capabilities after exec from the bounding set).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            os._exit(99)


def test_an_unreadable_file_is_a_clear_error_and_stays_untouched(tmp_path: Path) -> None:
    secret = tmp_path / "secret.log"
    secret.write_bytes(ALLOCATED + b"\n")
    secret.chmod(0)
    preexec = without_read_override if os.geteuid() == 0 else None
    for args in (["migrate", secret, "-o", tmp_path / "out.jsonl"], ["migrate", secret, "--in-place"]):
        done = kvlog(*args, preexec_fn=preexec)
        if done.returncode == 99:
            pytest.skip("running as root without CAP_SETPCAP: cannot make a file unreadable to this process")
        assert done.returncode == 2 and b"secret.log: cannot open: Permission denied" in done.stderr
    checked = kvlog("validate", secret, preexec_fn=preexec)
    assert checked.returncode == 2 and b"secret.log: cannot open: Permission denied" in checked.stderr
    secret.chmod(0o600)
    assert secret.read_bytes() == ALLOCATED + b"\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.log"]


def file_size_limit(limit: int) -> object:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes get EFBIG

    return apply


@pytest.fixture
def big_log(tmp_path: Path) -> Path:
    source = tmp_path / "big.log"
    source.write_bytes((CORPUS / "gen2_2025.log").read_bytes() * 400)  # about 1 MiB
    source.chmod(0o604)
    return source


@pytest.mark.parametrize("target", ["-o", "--in-place", "--report"])
def test_a_full_disk_is_a_clear_error_leaving_the_input_and_no_partial_output(
    tmp_path: Path, big_log: Path, target: str
) -> None:
    before = big_log.read_bytes()
    args: list[str | Path] = {
        "-o": ["-o", tmp_path / "out.jsonl"],
        "--in-place": ["--in-place"],
        "--report": ["--dry-run", "--report", tmp_path / "report.json"],
    }[target]
    limit = 64 << 10 if target != "--report" else 16
    done = kvlog("migrate", big_log, *args, preexec_fn=file_size_limit(limit))
    assert done.returncode == 2, done.stderr
    assert b"File too large" in done.stderr
    assert big_log.read_bytes() == before and big_log.stat().st_mode & 0o777 == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.log"], "partial output, backup or temporary left"


def test_stdout_on_a_full_device_is_a_clear_error() -> None:
    source = CORPUS / "gen2_2025.log"
    with Path("/dev/full").open("wb") as full:
        done = kvlog("migrate", source, stdout=full)
        assert done.returncode == 2 and b"No space left on device" in done.stderr
        checked = kvlog("validate", source, stdout=full)  # every line is a finding to print
        assert checked.returncode == 2 and b"No space left on device" in checked.stderr
