"""``summarize`` and progress on every engine, the Ray engine on a real cluster of two raylets on loopback.

The fleet table must not depend on where the files were read: the same bytes in text, JSON and CSV
with ``--jobs 1``, ``--jobs 2`` and ``--engine ray``. Progress on the cluster reaches the inputs'
totals exactly, and a large file's bytes arrive while its task reads it, not only with its result.
The commands are called as a library, connected to the cluster by its address.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from fleet_helpers import ENVIRONMENT, Cluster, fleet_logs
from progress_helpers import Recorder, sizes

from kvlog import commands
from kvlog.io.progress import read_in_task

CORPUS = Path(__file__).resolve().parent / "corpus"


@pytest.fixture
def driver_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process connects as a driver, as the nodes were started (no token authentication on loopback)."""
    for name in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED"):
        monkeypatch.setenv(name, ENVIRONMENT[name])


def table(logs: list[Path], fmt: str, **engine: object) -> tuple[int, int, bytes]:
    out = io.BytesIO()
    done = commands.summarize(logs, output_format=fmt, stdout=out, **engine)  # type: ignore[arg-type]
    return done.exit_status, done.events, out.getvalue()


@pytest.mark.usefixtures("driver_environment")
def test_the_fleet_table_is_byte_for_byte_the_same_on_every_engine(cluster: Cluster, tmp_path: Path) -> None:
    logs = fleet_logs(tmp_path / "logs", CORPUS, 60)
    for fmt in ("text", "json", "csv"):
        local = table(logs, fmt, jobs=1)
        assert table(logs, fmt, jobs=2) == local, fmt
        recorder = Recorder()
        assert table(logs, fmt, engine="ray", ray_address=cluster.address, progress=recorder) == local, fmt
        assert recorder.totals == (len(logs), sizes(logs))
        status, events, text = local
        assert status == 2  # the .gz cut short is named; the others are summarized
        assert events > 60 and text.count(b"rank0059-") >= 1


@pytest.mark.usefixtures("driver_environment")
def test_progress_on_the_cluster_tells_a_large_files_bytes_as_its_task_reads_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    from kvlog.fleet.ray_engine import READ_REPORT_BYTES  # noqa: PLC0415 - the fleet extra, once Ray is there

    big = tmp_path / "big.log"
    text = (CORPUS / "gen2_2025.log").read_bytes()
    big.write_bytes(text * (5 * READ_REPORT_BYTES // 2 // len(text)))
    logs = [big, *fleet_logs(tmp_path / "logs", CORPUS, 8)]
    recorder = Recorder()
    done = commands.migrate(logs, output=tmp_path / "out", engine="ray", ray_address=cluster.address, progress=recorder)
    assert done.exit_status == 2 and len(done.problems) == 1  # the .gz cut short, counted as done all the same
    assert recorder.reads_before_first_file() == [READ_REPORT_BYTES] * 2
    assert recorder.totals == (len(logs), sizes(logs))
    made = io.BytesIO()
    assert commands.migrate(logs[1:-1], only_events=True, stdout=made).exit_status == 0
    events = tmp_path / "events.jsonl"  # over 16 MiB: validated in byte ranges, each told as its result comes
    events.write_bytes(made.getvalue() * ((17 << 20) // len(made.getvalue())))
    inputs = [events, tmp_path / "missing.jsonl", tmp_path / "out" / "rank0001-gen1_early_2025.log"]
    recorder = Recorder()
    checked = commands.validate(
        inputs, engine="ray", ray_address=cluster.address, progress=recorder, on_finding=lambda _: None
    )
    assert checked.exit_status == 2
    assert len(recorder.reads_before_first_file()) > 1
    assert recorder.totals == (len(inputs), sizes(inputs))


def read_until_stopped(_state: object, marker: str) -> str:
    """A task reading for five minutes unless stopped, too little for a progress item; ``marker`` says how it ended.

    A ``marker`` that exists already is done at once. Five minutes, not less: under a loaded machine the
    driver's cancellation can take tens of seconds to reach the task, and a task that ended of itself
    first would say "finished" of a stop that works.
    """
    if Path(marker).exists():
        return marker
    Path(f"{marker}.started").touch()
    try:
        for _ in range(30000):
            read_in_task(1024)
            time.sleep(0.01)  # the work between two reads
    except BaseException as exc:
        Path(marker).write_text(type(exc).__name__)
        raise
    Path(marker).write_text("finished")
    return marker


def appears(path: Path, within_s: float = 60) -> bool:
    """Whether ``path`` appears within ``within_s`` (a task on the cluster writes it)."""
    deadline = time.monotonic() + within_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.exists()


@pytest.mark.usefixtures("driver_environment")
def test_a_task_telling_its_reads_stops_at_its_next_read_when_the_driver_stops(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Its work runs in a thread beside its stream: the cancellation must still reach the work, as before."""
    from ray import cloudpickle  # noqa: PLC0415 - the fleet extra

    from kvlog.fleet import connected  # noqa: PLC0415 - the fleet extra

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the nodes cannot import this test module
    quick, slow = tmp_path / "quick", tmp_path / "slow"
    quick.touch()  # done at once: the slow one is running when the driver stops
    with connected(cluster.address, lambda _: None) as engine:
        results = engine.in_order(
            read_until_stopped, [str(quick), str(slow)], start=str, start_args=(), on_read=lambda _: None
        )
        assert next(results) == str(quick)
        assert appears(slow.with_name("slow.started"))
        results.close()
        assert appears(slow, within_s=180)
    assert slow.read_text() == "_Stopped"
