"""`kvlog migrate` on real files: compressed streams, directories, in-place, signals.

What a run does is tested through ``kvlog.commands.migrate``; the console (standard input and output,
exit statuses, messages) through the CLI in process (``cli_harness``). Real processes remain where only
a process shows it: a progress bar on a terminal, a process killed, what a fresh interpreter imports.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard
from cli_harness import kvlog, kvlog_text
from migration_helpers import broken_migrations, broken_step

from kvlog import commands

CORPUS = Path(__file__).parent / "corpus"
GEN1 = CORPUS / "gen1_early_2025.log"
DISTRACTORS = CORPUS / "distractors.log"
#: a run under post-capture sizing before sglang's wording fix (this module's own log: counts below depend on it)
OLD_LOG = """\
[2026-07-21 09:00:00] server_args=ServerArgs(model_path='m', tp_size=2, enable_post_capture_kv_sizing=True)
[2026-07-21 09:00:52 TP0] Load weight begin. avail mem=139.06 GB
[2026-07-21 09:02:10 TP0] Load weight end. elapsed=78.01 s, type=LlamaForCausalLM, dtype=torch.bfloat16, \
avail mem=72.91 GB, mem usage=66.15 GB.
[2026-07-21 09:02:11 TP0] KvVmmArena[0] ready: device=0 reserved=78.8 GiB granularity=2048 KiB
[2026-07-21 09:02:11 TP1] KvVmmArena[0] ready: device=1 reserved=78.8 GiB granularity=2048 KiB
[2026-07-21 09:02:11 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 36.88 GB, \
V size: 36.88 GB
[2026-07-21 09:02:11 TP1] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 36.88 GB, \
V size: 36.88 GB
[2026-07-21 09:02:11 TP0] Memory pool end. avail mem=72.77 GB
[2026-07-21 09:02:12 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 0.46 GB, \
V size: 0.46 GB
[2026-07-21 09:03:40 TP0] Capture cuda graph end. Time elapsed: 87.11 s. mem usage=2.05 GB. avail mem=69.74 GB.
[2026-07-21 09:03:41 TP0] Post-capture KV sizing: max_running_requests 4096 -> 2048
[2026-07-21 09:03:42 TP0] Post-capture KV sizing: max_total_num_tokens=1638400, free memory=3.27 GB
[2026-07-22 14:00:00] server_args=ServerArgs(model_path='n', tp_size=1)
[2026-07-22 14:00:31 TP0] Load weight begin. avail mem=139.06 GB
[2026-07-22 14:01:15 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1779712, K size: 109.66 GB, \
V size: 109.66 GB
[2026-07-22 14:01:15 TP0] Memory pool end. avail mem=75.40 GB
[2026-07-22 14:02:30 TP0] Post-capture KV sizing: max_total_num_tokens=331776, free memory=40.11 GB
"""
OLD_EVENTS = 14  # with the CUDA-graph capture (issue 33)


@pytest.fixture
def old(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    path = tmp_path / "src" / "old.log"
    path.write_text(OLD_LOG)
    return path


def migrated(*inputs: str | Path, **options: object) -> bytes:
    """What ``kvlog migrate INPUTS`` writes to standard output, migrated in this process."""
    out = io.BytesIO()
    outcome = commands.migrate(inputs, stdout=out, **options)  # type: ignore[arg-type]
    assert outcome.exit_status == 0, outcome.problems
    return out.getvalue()


def migrate(*inputs: str | Path, **options: object) -> commands.MigrateOutcome:
    return commands.migrate(inputs, **options)  # type: ignore[arg-type]


def valid(events: bytes, tmp_path: Path) -> bool:
    log = tmp_path / f"check-{hashlib.sha256(events).hexdigest()[:8]}.jsonl"
    log.write_bytes(events)
    return commands.validate(log).exit_status == 0


def lines(data: bytes) -> list[bytes]:
    *head, last = data.split(b"\n")
    return [line + b"\n" for line in head] + ([last] if last else [])


def test_stdout_stdin_and_o_agree(old: Path, tmp_path: Path) -> None:
    expected = migrated(old)
    from_stdin = kvlog("migrate", "-", stdin=old.read_bytes())
    assert from_stdin.returncode == 0
    assert from_stdin.stdout.replace(b'"file":null', b"") == expected.replace(f'"file":"{old}"'.encode(), b"")
    out = tmp_path / "out.jsonl"
    assert kvlog("migrate", old, "-o", out).returncode == 0
    assert out.read_bytes() == expected
    assert len(lines(expected)) == len(lines(old.read_bytes()))


def test_compressed_in_and_out(old: Path, tmp_path: Path) -> None:
    expected = migrated(old)
    source_gz, source_zst = tmp_path / "old.log.gz", tmp_path / "old.log.zst"
    source_gz.write_bytes(gzip.compress(old.read_bytes()))
    source_zst.write_bytes(zstandard.ZstdCompressor().compress(old.read_bytes()))
    for source, suffix in ((source_gz, ".gz"), (source_zst, ".zst"), (old, ".gz")):
        out = tmp_path / f"out-{source.name}{suffix}"
        assert migrate(source, output=out).exit_status == 0
        data = out.read_bytes()
        plain = gzip.decompress(data) if suffix == ".gz" else zstandard.ZstdDecompressor().stream_reader(data).read()
        assert plain == expected.replace(str(old).encode(), str(source).encode())


def test_in_place_replaces_atomically_and_keeps_a_backup(old: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log.gz"
    original = gzip.compress(old.read_bytes())
    log.write_bytes(original)
    log.chmod(0o640)
    result = migrate(log, in_place=True, backup_suffix=".before-kvlog")
    assert result.exit_status == 0, result.problems
    assert (tmp_path / "server.log.gz.before-kvlog").read_bytes() == original
    assert gzip.decompress(log.read_bytes()) == migrated(old).replace(str(old).encode(), str(log).encode())
    assert log.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.log.gz", "server.log.gz.before-kvlog", "src"]


def test_refuses_to_overwrite_its_input(old: Path, tmp_path: Path) -> None:
    """The console contract of a refused run: one line naming the options as flags, exit 2, nothing written."""
    log = tmp_path / "server.log"
    shutil.copy(old, log)
    result = kvlog("migrate", log, "-o", log)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        f"kvlog migrate: -o {log} is the input {log}; it would be overwritten: use --in-place to replace it\n"
    )
    assert result.stdout == b""
    assert log.read_bytes() == old.read_bytes()
    refused = kvlog("migrate", "--in-place", "-")
    assert (refused.returncode, refused.stderr) == (2, b"kvlog migrate: --in-place cannot replace standard input\n")


def test_directories_globs_and_several_outputs(old: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for source in (old, GEN1, DISTRACTORS):
        shutil.copy(source, logs / source.name)
    (logs / ".hidden.log").write_text("KV Cache is allocated. KV size: 1.00 GB.\n")
    out = tmp_path / "out"
    assert migrate(logs, output=out).exit_status == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([old.name, GEN1.name, DISTRACTORS.name])
    assert (out / GEN1.name).read_bytes() == migrated(logs / GEN1.name)
    assert migrated(str(logs / "gen1_*.log")) == migrated(logs / GEN1.name)
    missing = migrate(str(logs / "nothing_*.log"))
    assert missing.exit_status == 2 and missing.problems == (f"{logs / 'nothing_*.log'}: no file matches this pattern",)


def test_jobs_give_the_same_result_on_standard_output(tmp_path: Path) -> None:
    """Workers stage their output; the parent joins it, in input order, onto the real standard output."""
    inputs = sorted(CORPUS.glob("*.log"))
    one = kvlog("migrate", *inputs, "--jobs", "1")
    two = kvlog("migrate", *inputs, "--jobs", "2")
    assert one.returncode == two.returncode == 0
    assert one.stdout == two.stdout == b"".join(migrated(p) for p in inputs)
    assert one.stderr == two.stderr


def test_one_file_migrate_starts_without_the_worker_machinery(old: Path, tmp_path: Path) -> None:
    """multiprocessing and concurrent.futures cost a one-file run ~10 ms of start-up: only --jobs N loads them."""
    code = (
        "import sys; from kvlog.cli import main\n"
        f"try: main(['migrate', {str(old)!r}, '-o', {str(tmp_path / 'out.jsonl')!r}], standalone_mode=False)\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('multiprocessing', 'concurrent')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "out.jsonl").read_bytes().count(b'"schema_version"') == OLD_EVENTS


def test_only_events_validate_and_v1_validates_as_v1(old: Path, tmp_path: Path) -> None:
    for options in ({}, {"to_catalog": 1}):
        events = migrated(old, GEN1, only_events=True, **options)
        assert valid(events, tmp_path)
        assert all(json.loads(line)["event"] for line in lines(events))


def test_dry_run_writes_nothing_but_the_report(old: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    shutil.copy(old, log)
    before = log.stat().st_mtime_ns
    stdout = io.BytesIO()
    result = migrate(log, dry_run=True, in_place=True, report=tmp_path / "report.json", stdout=stdout)
    assert result.exit_status == 0
    assert stdout.getvalue() == b""
    assert log.read_bytes() == old.read_bytes() and log.stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "server.log", "src"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["events"] == OLD_EVENTS
    assert report["events_by_source_format"]["sglang-text/2026-07-postcapture"] == 4
    assert report["inferred_fields"]["allocation_state: arena-before-pool"] == 2
    assert report["inferred_fields"]["allocation_state: device-memory-bound"] == 1
    assert report["inferred_fields"]["allocation_state: v1-claims-allocated"] == 1
    assert report["companion_lines"] == {"post_capture": 1, "run_start": 2}  # the capture line is an event


def test_dead_letters_report_and_strict(old: Path, tmp_path: Path) -> None:
    dead, report = tmp_path / "dead.jsonl", tmp_path / "report.json"
    lenient = migrate(DISTRACTORS, dead_letter=dead, report=report, output=tmp_path / "o")
    assert lenient.exit_status == 0
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    # a request quoting an allocation line, and figures of memory in words no rule reads: reported, not silent
    assert [d["line"] for d in letters] == [5, 6, 7, 14, 21]
    assert all(d["file"] == str(DISTRACTORS) and d["reason"] and d["text"] for d in letters)
    assert json.loads(report.read_text())["unparsed_memory_lines"] == 5
    strict = migrate(DISTRACTORS, strict=True, output=tmp_path / "o2")
    assert strict.exit_status == 1
    assert migrate(old, strict=True, output=tmp_path / "o3").exit_status == 0


def test_keep_original(old: Path) -> None:
    out = lines(migrated(old, keep_original=True))
    source = lines(old.read_bytes())
    event = json.loads(out[5])
    assert event["migrated"]["original"] == source[5].decode().rstrip("\n")


def test_text_and_legacy_wording(old: Path, tmp_path: Path) -> None:
    text = lines(migrated(old, output_format="text"))
    legacy = lines(migrated(old, output_format="legacy"))
    source = lines(old.read_bytes())
    assert b"[2026-07-21 09:02:11 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1933312" in text[5]
    assert b"[2026-07-21 09:02:12 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312" in text[8]
    assert b"[2026-07-22 14:01:15 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1779712" in text[14]
    assert b"KvVmmArena[0] ready: device=0 reserved_va=78.8 GiB granularity=2048 KiB" in text[3]
    assert legacy == source  # the old wording, written from current events, is what old sglang printed
    today = (
        "[2026-09-03 12:01:02 TP0] KvVmmArena[51877_0] ready: device=0 reserved_va=9.2 GiB granularity=2048 KiB "
        "handle_type=POSIX_FD\n"
        "[2026-09-03 12:01:02 TP0] SWA KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1061120, "
        "K size: 4.05 GB, V size: 4.05 GB\n"
        "[2026-09-03 12:01:02 TP0] SWAKVPool VA upper bound: 18.22 GB, swa size: 1061120, full size: 1326400\n"
    )
    (tmp_path / "today.log").write_text(today)
    back = migrated(tmp_path / "today.log", output_format="legacy").decode().splitlines()
    assert back == [
        "[2026-09-03 12:01:02 TP0] KvVmmArena[51877_0] ready: device=0 reserved=9.2 GiB granularity=2048 KiB",
        "[2026-09-03 12:01:02 TP0] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1061120, "
        "K size: 4.05 GB, V size: 4.05 GB",
        "[2026-09-03 12:01:02 TP0] SWAKVPool mem usage: 18.22 GB, swa size: 1061120, full size: 1326400",
    ]
    older = lines(migrated(old, output_format="legacy", legacy_generation="sglang-text/2025-06"))
    assert older[5].endswith(b"KV Cache is allocated. #tokens: 1933312, K size: 36.88 GB, V size: 36.88 GB\n")


def test_legacy_from_kvlog_events_reads_back_to_the_same_figures(tmp_path: Path) -> None:
    """kvlog's JSON events -> the old wording -> migrated again: the same figures, within printed precision."""
    envelope = {"timestamp": "2026-09-01T12:00:00Z", "level": "info", "ranks": {"tp": 0}}
    pools = [
        {"label": None, "layout": "mha", "k_bytes": 39_599_144_960, "v_bytes": 39_599_144_961, "num_tokens": 5},
        {"label": "SWA", "layout": "mha", "k_bytes": 4_348_654_387, "v_bytes": 4_348_654_387, "num_tokens": 7},
        {"label": None, "layout": "mla", "kv_bytes": 123_456_789_012, "num_tokens": 9},
    ]
    events = [
        {
            "event": "kv_pool.allocation",
            "schema_version": 2,
            **envelope,
            "pool": "MHATokenToKVPool",
            "allocation_state": "va_upper_bound",
            "dtype": "torch.bfloat16",
            "committed_bytes": 2 << 20,
            **pool,
        }
        for pool in pools
    ]
    events.append(
        {
            "event": "kv_arena.ready",
            "schema_version": 2,
            **envelope,
            "arena_id": "42_0",
            "backend": "cuda",
            "device": 3,
            "reserved_va_bytes": 84_611_678_208,
            "granularity_bytes": 2 << 20,
            "handle_type": None,
        }
    )
    data = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    assert valid(data, tmp_path)
    (tmp_path / "events.jsonl").write_bytes(data)
    legacy = migrated(tmp_path / "events.jsonl", output_format="legacy")
    assert b"reserved=78.8 GiB" in legacy and b"is allocated" in legacy and b"VA upper bound" not in legacy
    (tmp_path / "legacy.log").write_bytes(legacy)
    back = [json.loads(line) for line in lines(migrated(tmp_path / "legacy.log", only_events=True))]
    assert [e["event"] for e in back] == [e["event"] for e in events]
    for source, event in zip(events, back, strict=True):
        spread = event["migrated"].get("uncertainty_bytes", {})
        for name in ("k_bytes", "v_bytes", "kv_bytes", "reserved_va_bytes"):
            if name in source:
                assert abs(event[name] - source[name]) <= spread[name] + 1, name
        for name in ("label", "layout", "num_tokens", "dtype", "device", "arena_id", "granularity_bytes"):
            if name in source:
                assert event[name] == source[name], name


def test_idempotent(old: Path, tmp_path: Path) -> None:
    once = tmp_path / "once.log"
    once.write_bytes(migrated(old))
    assert migrated(once) == once.read_bytes()
    v1 = tmp_path / "v1.jsonl"
    v1.write_bytes(migrated(old, only_events=True, to_catalog=1))
    assert migrated(v1, to_catalog=1) == v1.read_bytes()


def test_bad_inputs_are_named_and_the_rest_is_migrated(old: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "broken.log.gz"
    corrupt.write_bytes(gzip.compress(old.read_bytes())[:200])
    out = tmp_path / "out"
    result = migrate(tmp_path / "missing.log", corrupt, old, output=out)
    assert result.exit_status == 2
    stderr = "\n".join(result.problems)
    assert f"{tmp_path / 'missing.log'}: cannot open" in stderr
    assert f"{corrupt}: cannot read after " in stderr and "(after line " in stderr
    assert (out / old.name).read_bytes() == migrated(old)
    assert not (out / corrupt.name).exists()


def test_broken_migrations_exit_3(old: Path, tmp_path: Path) -> None:
    root = broken_migrations(tmp_path)
    result = kvlog("migrate", old, "--migrations", root)
    assert result.returncode == 3
    assert str(broken_step(root)).encode() in result.stderr and b"unknown op 'renam'" in result.stderr


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1.2M-line server log: request lines with the old memory lines spread through it."""
    path = tmp_path_factory.mktemp("big") / "server.log"
    memory = OLD_LOG.encode().splitlines(keepends=True)
    request = b"[2026-07-21 10:00:00 TP0] Decode batch. #running-req: 64, #token: 190211, token usage: 0.18, " * 1
    request += b"cuda graph: True, gen throughput (token/s): 3120.55, #queue-req: 0\n"
    with path.open("wb") as out:
        for block in range(400):
            out.write(memory[block % len(memory)])
            out.write(request * 3000)
    return path


def test_in_place_survives_sigkill_at_any_moment(big_log: Path, tmp_path: Path) -> None:
    expected = tmp_path / "expected.log"
    assert migrate(big_log, output=expected).exit_status == 0
    original_digest = hashlib.sha256(big_log.read_bytes()).hexdigest()
    complete = hashlib.sha256(expected.read_bytes().replace(str(big_log).encode(), b"X")).hexdigest()
    outcomes = set()
    for delay in (0.05, 0.2, 0.4, 0.6, 0.9, 1.3, 2.0):
        work = tmp_path / f"run-{delay}"
        work.mkdir()
        log = work / "server.log"
        shutil.copy(big_log, log)
        expected_complete = expected.read_bytes().replace(str(big_log).encode(), str(log).encode())
        process = subprocess.Popen([sys.executable, "-m", "kvlog", "migrate", "--in-place", str(log)])
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        data = log.read_bytes()
        if hashlib.sha256(data).hexdigest() == original_digest:
            outcomes.add("original")
        else:
            assert data == expected_complete, f"killed after {delay}s: the log is neither the original nor complete"
            outcomes.add("complete")
            assert hashlib.sha256((work / "server.log.orig").read_bytes()).hexdigest() == original_digest
        leftovers = [p.name for p in work.iterdir() if p.name not in ("server.log", "server.log.orig")]
        assert all(name.endswith(".kvlog-tmp") for name in leftovers), leftovers
    assert complete
    assert "original" in outcomes


def stderr_on_a_terminal(*args: str | Path) -> bytes:
    """What ``kvlog migrate ARGS`` writes to standard error when that is a terminal (a pty); it must exit 0."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "kvlog", "migrate", *map(str, args)], stderr=follower, stdout=subprocess.DEVNULL
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert process.wait(timeout=300) == 0
    os.close(leader)
    return seen


def test_progress_bar_on_a_terminal_only(big_log: Path, tmp_path: Path) -> None:
    assert b"migrating" in stderr_on_a_terminal(big_log, "-o", tmp_path / "out")
    piped = kvlog("migrate", big_log, "-o", tmp_path / "out2")
    assert b"migrating" not in piped.stderr


def test_demo_ends_by_migrating_an_old_log() -> None:
    result = kvlog_text("demo")
    assert result.returncode == 0, result.stderr
    assert "kvlog migrate: lines of old sglang logs that read differently today" in result.stderr
    assert "  now: [2026-07-21 09:02:11 TP0] KV Cache VA upper bound. dtype: torch.bfloat16" in result.stderr
    assert "inferred: allocation_state va_upper_bound (arena-before-pool, line 5)" in result.stderr
    assert "reserved_va=78.8 GiB" in result.stderr
    assert "kvlog demo: 8 old sglang lines migrated" in result.stderr
    assert "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1933312" not in result.stdout


@pytest.mark.parametrize("output_format", ["text", "legacy"])
def test_text_and_legacy_outputs_are_fixed_points(output_format: str, tmp_path: Path) -> None:
    inputs = sorted(CORPUS.glob("*.log"))
    once = tmp_path / "once"
    assert migrate(*inputs, output_format=output_format, output=once).exit_status == 0
    for path in sorted(once.iterdir()):
        assert migrated(path, output_format=output_format) == path.read_bytes(), path.name


def test_usage_errors_exit_2_naming_the_flags(old: Path) -> None:
    """Every option conflict is tested in test_commands.py; here, that the console words them with flags."""
    result = kvlog("migrate", old, GEN1, "--jobs", "2", "--to", "7")
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr == b"kvlog migrate: --to 7: catalog versions are 1..2\n"
    result = kvlog("migrate", old, "--format", "text", "--to", "1")
    assert result.stderr == b"kvlog migrate: --to chooses the catalog version of JSON events: it needs --format jsonl\n"


def test_in_place_refuses_a_symlink_and_leaves_both_link_and_file(old: Path, tmp_path: Path) -> None:
    """The file --in-place replaces is the one opened (O_NOFOLLOW): a link is named, never written through."""
    real = tmp_path / "real.log"
    shutil.copy(old, real)
    link = tmp_path / "link.log"
    link.symlink_to(real)
    result = migrate(link, in_place=True)
    assert result.exit_status == 2
    assert result.problems[0].startswith(f"{link}: is a symbolic link")
    assert link.is_symlink() and real.read_bytes() == old.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.log", "real.log", "src"]


#: two ranks of one run; only TP0 logged its KV-cache dtype, which the migration infers into its pool
TWO_RANKS = """\
[2025-09-10 14:22:00 TP0] Using KV cache dtype: torch.float8_e5m2
[2025-09-10 14:22:01 TP0] KV Cache is allocated. #tokens: 2371584, K size: 56.57 GB, V size: 56.58 GB
[2025-09-10 14:22:01 TP1] KV Cache is allocated. #tokens: 2371584, K size: 56.57 GB, V size: 56.58 GB
"""


@pytest.mark.parametrize("generation", [None, "sglang-text/2026-06", "sglang-text/2026-08"])
def test_legacy_never_writes_an_inferred_value_so_every_rank_of_a_run_reads_alike(
    tmp_path: Path, generation: str | None
) -> None:
    """The dtype was inferred from TP0's other line: no rank's pool line printed it, and none gets it back.

    By default each line is written in the wording of the generation it was read from (the log itself);
    a chosen generation whose pool line prints a dtype cannot print this pool, so both ranks fall back alike.
    """
    log = tmp_path / "ranks.log"
    log.write_text(TWO_RANKS)
    events = [json.loads(line) for line in lines(migrated(log, only_events=True))]
    assert [event["dtype"] for event in events] == ["torch.float8_e5m2", None]  # the inference legacy leaves out
    legacy = migrated(log, output_format="legacy", legacy_generation=generation).decode().splitlines()
    tp0, tp1 = (line.split("] ", 1)[1] for line in legacy[1:])
    assert tp0 == tp1 and "dtype" not in tp0
    if generation is None:
        assert legacy == TWO_RANKS.splitlines()


def test_text_marks_the_values_it_says_that_were_inferred_and_reads_the_mark_back(tmp_path: Path) -> None:
    """``--format text`` ends a line ``(inferred: …)``, naming what it says that no line stated; it reads back."""
    log = tmp_path / "ranks.log"
    log.write_text(TWO_RANKS)
    text = migrated(log, output_format="text")
    tp0, tp1 = text.decode().splitlines()[1:]
    assert tp0.endswith(
        "KV Cache is allocated. dtype: torch.float8_e5m2, #tokens: 2371584, K size: 56.57 GB, "
        "V size: 56.58 GB (inferred: allocation_state, dtype)"
    )
    assert tp1.endswith(
        "KV Cache is allocated. #tokens: 2371584, K size: 56.57 GB, V size: 56.58 GB (inferred: allocation_state)"
    )  # old sglang could not tell memory from address space
    again = tmp_path / "text.log"
    again.write_bytes(text)
    assert migrated(again, output_format="text") == text  # the mark is read back as the same inferences
    event = json.loads(lines(migrated(again, only_events=True))[0])
    assert (event["dtype"], event["migrated"]["inferred"]["dtype"]["rule"]) == ("torch.float8_e5m2", "marked-inferred")
    assert migrated(again, output_format="legacy").decode().splitlines()[1:] == [
        line.replace("dtype: torch.float8_e5m2, ", "") for line in TWO_RANKS.splitlines()[1:]
    ]  # an inferred value is not written back in the old wording either
