"""Inputs and outputs in object storage (``s3://``) and ``file://`` URIs, against a real S3-compatible server.

A moto server runs on loopback for the module; kvlog reaches it through the standard ``AWS_*``
variables and ``AWS_ENDPOINT_URL``, as it would reach MinIO or S3. Every result is compared with
the same run on local files.
"""

from __future__ import annotations

import gzip
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import PYTHON_M_KVLOG, kvlog
from store_helpers import BUCKET, S3, forget_store_clients, s3_server, server_logs, upload

from kvlog import commands
from kvlog.errors import OptionError
from kvlog.io.progress import input_size

CORPUS = Path(__file__).resolve().parent / "corpus"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    with s3_server() as started:
        yield started


@pytest.fixture
def logs(tmp_path: Path) -> list[Path]:
    return server_logs(tmp_path / "logs")


def as_stored(local: bytes, directory: Path, uri: str) -> bytes:
    """What a run on ``directory``'s files wrote, each input named as its object under ``uri`` instead."""
    return local.replace(f"{directory}/".encode(), uri.encode())


@pytest.mark.parametrize("jobs", [1, 2])
def test_migrate_of_a_store_glob_into_a_store_prefix_is_byte_for_byte_the_local_run(
    s3: S3, logs: list[Path], tmp_path: Path, jobs: int
) -> None:
    prefix = f"glob-{jobs}/"
    upload(s3, logs, f"{prefix}in/")
    local = commands.migrate(
        logs,
        output=tmp_path / "out/",
        output_format="text",  # today's wording: no line names its input (a JSON event would, in migrated.file)
        report=tmp_path / "report.json",
        dead_letter=tmp_path / "dead.jsonl",
        jobs=jobs,
    )
    stored = commands.migrate(
        f"s3://{BUCKET}/{prefix}in/*.log*",
        output=f"s3://{BUCKET}/{prefix}out/",
        output_format="text",
        report=f"s3://{BUCKET}/{prefix}report.json",
        dead_letter=f"s3://{BUCKET}/{prefix}dead.jsonl",
        jobs=jobs,
    )
    assert (stored.exit_status, stored.problems) == (local.exit_status, local.problems) == (0, ())
    outputs = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()}
    assert {key.rpartition("/")[2]: s3.get(key) for key in s3.keys(f"{prefix}out/")} == outputs
    assert len(outputs) == len(logs)
    inputs = f"s3://{BUCKET}/{prefix}in/"
    for name in ("report.json", "dead.jsonl"):  # each names the inputs: the paths there, the URIs here
        assert s3.get(f"{prefix}{name}") == as_stored((tmp_path / name).read_bytes(), logs[0].parent, inputs)
    assert inputs.encode() in s3.get(f"{prefix}dead.jsonl")
    assert s3.uploads_in_progress() == []


@pytest.mark.parametrize("name", ["one.jsonl", "one.jsonl.gz"])
def test_migrate_to_a_single_object_writes_what_a_local_file_gets(
    s3: S3, logs: list[Path], tmp_path: Path, name: str
) -> None:
    [uri] = upload(s3, logs[1:2], "single/in/")  # the gzipped one
    local = commands.migrate(logs[1], output=tmp_path / name)
    stored = commands.migrate(uri, output=f"s3://{BUCKET}/single/{name}")
    assert stored.exit_status == local.exit_status == 0
    written, expected = s3.get(f"single/{name}"), (tmp_path / name).read_bytes()
    if name.endswith(".gz"):
        written, expected = gzip.decompress(written), gzip.decompress(expected)
    # each event names its input (migrated.file): the path there, the URI here
    assert written == as_stored(expected, logs[1].parent, uri.rpartition("/")[0] + "/")


def test_a_zstd_object_is_read_as_a_zstd_file_is(s3: S3, logs: list[Path], tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    compressed = tmp_path / f"{logs[0].name}.zst"
    compressed.write_bytes(zstandard.ZstdCompressor().compress(logs[0].read_bytes()))
    [uri] = upload(s3, [compressed], "zstd/")
    local = commands.migrate(compressed, output=tmp_path / "local.log", output_format="text")
    stored = commands.migrate(uri, output=f"s3://{BUCKET}/zstd/out.log.zst", output_format="text")
    assert stored.exit_status == local.exit_status == 0
    written = zstandard.ZstdDecompressor().decompressobj().decompress(s3.get("zstd/out.log.zst"))
    assert written == (tmp_path / "local.log").read_bytes()


def test_migrate_to_a_bucket_writes_one_object_per_input_at_its_root(s3: S3, logs: list[Path]) -> None:
    s3.client.create_bucket(Bucket="kvlog-root")
    [uri] = upload(s3, logs[:1], "root/")
    assert commands.migrate(uri, output="s3://kvlog-root", output_format="text").exit_status == 0
    assert s3.keys("", bucket="kvlog-root") == [logs[0].name]


def test_validate_of_store_inputs_finds_what_it_finds_in_local_files(s3: S3, logs: list[Path], tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    stream = io.BytesIO()
    commands.migrate(logs, only_events=True, stdout=stream)
    events.write_bytes(stream.getvalue())
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"event":"kv_pool.allocation"}\nnot json\n' + events.read_bytes()))
    upload(s3, [events, broken], "validate/")
    local = commands.validate([events, broken])
    stored = commands.validate([f"s3://{BUCKET}/validate/*.jsonl*"])
    assert (stored.exit_status, stored.counts) == (local.exit_status, local.counts)
    assert local.exit_status == 1
    uri = f"s3://{BUCKET}/validate/"
    assert [str(finding) for finding in stored.findings] == [
        str(finding).replace(f"{tmp_path}/", uri) for finding in local.findings
    ]


def test_validate_names_a_store_pattern_or_prefix_that_lists_nothing_and_exits_2(s3: S3) -> None:
    names = [f"s3://{BUCKET}/nothing-here/*.jsonl", f"s3://no-such-{BUCKET}/*.jsonl"]
    names += [f"s3://{BUCKET}/nothing-here/", f"s3://no-such-{BUCKET}/logs/"]
    outcome = commands.validate(names)
    assert outcome.exit_status == 2
    assert [(failure.name, failure.reason) for failure in outcome.input_failures] == [
        (names[0], "no object matches this pattern"),
        (names[1], "no such bucket"),
        (names[2], "no objects under this prefix"),
        (names[3], "cannot list: no such bucket"),
    ]


def test_an_input_that_fails_part_way_leaves_no_object_and_no_upload(s3: S3, logs: list[Path]) -> None:
    """The cut .gz yields more than one part of output before it fails: the upload begun must be aborted."""
    text = logs[0].read_bytes()
    whole = gzip.compress(text * (24 * (1 << 20) // len(text) + 1), mtime=0)
    s3.put("cut/in/a-cut.log.gz", whole[: len(whole) * 3 // 4])
    s3.put("cut/in/b-whole.log", text)
    s3.put("cut/out/a-cut.log.gz", b"the previous run's output\n")
    outcome = commands.migrate(f"s3://{BUCKET}/cut/in/", output=f"s3://{BUCKET}/cut/out/", jobs=2)
    assert outcome.exit_status == 2
    [problem] = outcome.problems
    assert problem.startswith(f"s3://{BUCKET}/cut/in/a-cut.log.gz: cannot read after ")
    assert s3.get("cut/out/a-cut.log.gz") == b"the previous run's output\n"  # left as it was, not half-replaced
    assert s3.get("cut/out/b-whole.log") != b""
    assert s3.uploads_in_progress() == []


def test_summarize_reads_a_store_glob_and_writes_its_table_to_an_object(
    s3: S3, logs: list[Path], tmp_path: Path
) -> None:
    inputs = upload(s3, logs, "summarize/in/")[0].rpartition("/")[0] + "/"
    local = commands.summarize(logs, output_format="json", output=tmp_path / "fleet.json")
    stored = commands.summarize(f"{inputs}*.log*", output_format="json", output=f"s3://{BUCKET}/summarize/fleet.json")
    assert stored.exit_status == local.exit_status == 0
    expected = as_stored((tmp_path / "fleet.json").read_bytes(), logs[0].parent, inputs)
    assert s3.get("summarize/fleet.json") == expected


def test_progress_counts_a_store_input_by_its_size_in_the_store(s3: S3, logs: list[Path]) -> None:
    [uri] = upload(s3, logs[1:2], "progress/")
    assert input_size(uri) == logs[1].stat().st_size > 0
    assert input_size(f"s3://{BUCKET}/progress/no-such-object.log") == 0  # the run names it; progress counts 0


#: runs kvlog, then prints the most memory its process ever held (VmHWM: counted from its exec, not its fork)
PEAK_MEMORY = """
import atexit, runpy, sys
atexit.register(lambda: print(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")), file=sys.stderr))
sys.argv = ["kvlog", *sys.argv[1:]]
runpy.run_module("kvlog", run_name="__main__")
"""


def peak_memory_mib(*args: str | Path) -> float:
    """The most memory (resident set) ``kvlog ARGS...`` ever held, in MiB."""
    done = subprocess.run([sys.executable, "-c", PEAK_MEMORY, *map(str, args)], capture_output=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    [peak] = [line for line in done.stderr.splitlines() if line.startswith(b"VmHWM:")]
    return int(peak.split()[1]) / 1024


def test_an_object_is_streamed_in_bounded_memory_whatever_its_size(s3: S3, tmp_path: Path) -> None:
    """An object 56 MiB larger costs a reader and a writer far less than 56 MiB more (one block, one part)."""
    peaks = {}
    for size in (8, 64):
        local = tmp_path / f"{size}.log"
        local.write_bytes((b"x" * 1023 + b"\n") * (size * 1024))
        uri = s3.put(f"bounded/{size}.log", local.read_bytes())
        read = peak_memory_mib("validate", "--quiet", uri)
        written = peak_memory_mib("migrate", local, "-o", f"s3://{BUCKET}/bounded/out-{size}.log")
        peaks[size] = (read, written)
    assert peaks[64][0] - peaks[8][0] < 24, peaks
    assert peaks[64][1] - peaks[8][1] < 24, peaks
    assert len(s3.get("bounded/out-64.log")) == 64 << 20


def test_a_run_stopped_mid_upload_leaves_no_object_and_no_upload(s3: S3, logs: list[Path]) -> None:
    """Stopped while its output is on its way, a run aborts the upload: no object, no upload left to pay for.

    The input comes through a pipe the test holds open, so the run cannot end before the signal.
    """
    text = logs[0].read_bytes()
    chunk = text * ((1 << 20) // len(text))
    run = subprocess.Popen(
        [*PYTHON_M_KVLOG, "migrate", "-", "-o", f"s3://{BUCKET}/stopped/out/big.log"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ,
    )
    assert run.stdin is not None
    while run.poll() is None and not s3.uploads_in_progress():  # the first part of the output is on its way
        run.stdin.write(chunk)
        run.stdin.flush()
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=120)  # (closes the pipe after the signal)
    assert run.returncode == 130, stderr
    assert s3.keys("stopped/out/") == []
    assert s3.uploads_in_progress() == []


def test_in_place_is_refused_on_a_store(s3: S3, logs: list[Path]) -> None:
    [uri] = upload(s3, logs[:1], "in-place/")
    with pytest.raises(OptionError, match=r"in_place cannot replace s3://.*: an object store has no atomic rename"):
        commands.migrate(uri, in_place=True)
    done = kvlog("migrate", "--in-place", uri)
    assert done.returncode == 2
    assert b"--in-place cannot replace s3://" in done.stderr
    assert s3.get(f"in-place/{logs[0].name}") == logs[0].read_bytes()


def test_a_missing_bucket_is_named_with_the_uri_never_a_traceback(s3: S3, logs: list[Path], tmp_path: Path) -> None:
    [uri] = upload(s3, logs[:1], "missing/")
    read = kvlog("migrate", f"s3://no-such-{BUCKET}/a.log", "-o", tmp_path / "a.log")
    written = kvlog("migrate", uri, "-o", f"s3://no-such-{BUCKET}/out.log")
    missing = kvlog("validate", f"s3://{BUCKET}/missing/no-such-object.jsonl")
    assert read.returncode == written.returncode == missing.returncode == 2
    assert f"s3://no-such-{BUCKET}/a.log: cannot open: no such bucket".encode() in read.stderr
    assert f"s3://no-such-{BUCKET}/out.log: cannot write: no such bucket".encode() in written.stderr
    assert f"s3://{BUCKET}/missing/no-such-object.jsonl: cannot open: no such object".encode() in missing.stderr
    for done in (read, written, missing):
        assert b"Traceback" not in done.stderr
    assert not (tmp_path / "a.log").exists()


def test_an_unreachable_endpoint_is_named_with_the_uri(s3: S3, tmp_path: Path) -> None:
    from fleet_helpers import free_port  # noqa: PLC0415

    nowhere = f"http://127.0.0.1:{free_port()}"
    environment = {
        **os.environ,
        "AWS_ENDPOINT_URL": nowhere,
        "AWS_MAX_ATTEMPTS": "1",
    }  # one attempt: no retries to wait for
    forget_store_clients()  # a client made for the server would be used again: a new run reads the variables
    try:
        done = kvlog("migrate", f"s3://{BUCKET}/a.log", f"s3://{BUCKET}/logs/", "-o", tmp_path, env=environment)
    finally:
        forget_store_clients()
    assert done.returncode == 2
    assert f"s3://{BUCKET}/logs/: cannot list: Could not connect to the endpoint URL".encode() in done.stderr
    assert f"s3://{BUCKET}/a.log: cannot open: Could not connect to the endpoint URL".encode() in done.stderr
    assert b"Traceback" not in done.stderr


def test_file_uris_read_and_write_local_files_as_paths_do(logs: list[Path], tmp_path: Path) -> None:
    local = commands.migrate(logs, output=tmp_path / "paths/", dead_letter=tmp_path / "dead.jsonl")
    uris = commands.migrate(
        f"file://{logs[0].parent}/*.log*",
        output=f"file://{tmp_path}/uris/",
        dead_letter=f"file://{tmp_path}/dead-uris.jsonl",
    )
    assert uris.exit_status == local.exit_status == 0
    expected = {path.name: path.read_bytes() for path in (tmp_path / "paths").iterdir()}
    assert {path.name: path.read_bytes() for path in (tmp_path / "uris").iterdir()} == expected
    assert (tmp_path / "dead-uris.jsonl").read_bytes() == (tmp_path / "dead.jsonl").read_bytes()
    checked = kvlog("validate", f"file://{tmp_path}/paths/{logs[0].name}")
    assert checked.returncode == commands.validate([tmp_path / "paths" / logs[0].name]).exit_status


def test_in_place_through_a_file_uri_replaces_the_file_keeping_its_backup(logs: list[Path]) -> None:
    log = logs[2]  # an old log the migration changes
    original = log.read_bytes()
    outcome = commands.migrate(f"file://{log}", in_place=True)
    assert outcome.exit_status == 0
    assert log.with_name(log.name + ".orig").read_bytes() == original != log.read_bytes()


def test_a_uri_without_the_fleet_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if it were not installed: importing it fails
    with pytest.raises(OptionError, match=r"s3://bucket/out/: object storage needs .*pip install 'kvlog\[fleet\]'"):
        commands.migrate("-", output="s3://bucket/out/")


def test_an_unknown_scheme_is_refused_before_anything_is_read() -> None:
    with pytest.raises(OptionError, match=r"az://container/a.log: unsupported scheme"):
        commands.migrate("az://container/a.log")


def test_a_local_run_never_imports_the_store_libraries(logs: list[Path], tmp_path: Path) -> None:
    probe = (
        "import sys; from kvlog import commands; "
        f"commands.migrate({[str(p) for p in logs]!r}, output={str(tmp_path / 'out/')!r}, jobs=1); "
        "commands.validate([" + repr(str(logs[0])) + "]); "
        "print(sorted(m for m in ('fsspec', 's3fs', 'gcsfs', 'botocore') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120, check=True)
    assert done.stdout.strip() == b"[]"


#: key -> the log it holds: each name with a glob character is also a pattern matching another object
LOOKALIKE_KEYS = {
    "run[1].log": "gen1_early_2025.log",
    "run1.log": "gen2_2025.log",
    "only[2].log": "gen3_dtype_2026.log",  # no only2.log: as a pattern it named nothing, and so could not be named
    "star*.log": "hybrid_swa_2026.log",
    "starry.log": "kvlog_json_v1.log",
    "what?.log": "postcapture_before_fix_2026_07.log",
    "whatx.log": "postcapture_after_fix_2026_09.log",
}


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(list(LOOKALIKE_KEYS), id="exact-keys"),
        pytest.param(["run[1x].log", "on?y[[]2].log", "st*y.log", "w*[!?].log", "no[3].log"], id="patterns"),
    ],
)
def test_a_key_with_glob_characters_is_that_object_and_a_pattern_only_when_no_object_has_that_name(
    s3: S3, tmp_path: Path, names: list[str]
) -> None:
    """The rule of local paths: the same names in a directory migrate to the same events and failures."""
    directory = tmp_path / "logs"
    directory.mkdir()
    for key, log in LOOKALIKE_KEYS.items():
        s3.put(f"lookalike/{key}", (CORPUS / log).read_bytes())
        (directory / key).write_bytes((CORPUS / log).read_bytes())
    runs = []
    for inputs in ([str(directory / name) for name in names], [f"s3://{BUCKET}/lookalike/{name}" for name in names]):
        stdout = io.BytesIO()
        outcome = commands.migrate(inputs, stdout=stdout)
        runs.append((outcome.exit_status, outcome.problems, outcome.report.files, stdout.getvalue()))
    local, stored = runs
    uri = f"s3://{BUCKET}/lookalike/"
    renamed = tuple(problem.replace(f"{directory}/", uri).replace("file", "object") for problem in local[1])
    assert stored == (local[0], renamed, local[2], as_stored(local[3], directory, uri))  # each event names its object
    if names == list(LOOKALIKE_KEYS):
        assert local[:3] == (0, (), len(names))  # every object read by its name: only2.log never existed
    else:  # run1.log, only[2].log, starry.log and whatx.log; no[3].log names nothing
        assert local[:3] == (2, (f"{directory}/no[3].log: no file matches this pattern",), 4)
