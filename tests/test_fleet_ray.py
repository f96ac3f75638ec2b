"""``--engine ray`` on a real cluster of two raylets on loopback: every byte as ``--jobs 1`` gives it.

The cluster is started by the test (``ray start --head`` and a worker node ``ray start --address``),
the commands on the cluster run as a user runs them (``kvlog`` in a subprocess, connected with
``--ray-address``), the local runs they are compared with in this process (``cli_harness``),
and each result is compared, byte for byte, with the local engine's on the same inputs.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from cli_harness import PYTHON_M_KVLOG, kvlog_process
from cli_harness import kvlog as in_process
from fleet_helpers import ENVIRONMENT, Cluster, fleet_logs

CORPUS = Path(__file__).resolve().parent / "corpus"


def kvlog(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    """``kvlog ARGS...`` as a user runs it; in this process when it runs on this machine (no ``--engine ray``).

    A run on the cluster stays a process: what it prints is compared byte for byte with the local run, and
    Ray's own driver would print onto the real standard streams, which only a process captures.
    """
    if "--ray-address" in args:
        return kvlog_process(*args, env=ENVIRONMENT, timeout=600)
    return in_process(*args, env=ENVIRONMENT)


def on_the(cluster: Cluster) -> list[str]:
    return ["--engine", "ray", "--ray-address", cluster.address]


def results(directory: Path, *names: str) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in names}


def test_migrate_of_200_files_on_two_nodes_is_byte_for_byte_the_local_run(cluster: Cluster, tmp_path: Path) -> None:
    logs = fleet_logs(tmp_path / "logs", CORPUS, 200)
    runs = {}
    for engine, options in (("local", ["--jobs", "1"]), ("ray", on_the(cluster))):
        out = tmp_path / engine
        out.mkdir()
        done = kvlog("migrate", *logs, "--report", out / "report.json", "--dead-letter", out / "dead.jsonl", *options)
        runs[engine] = (done.returncode, done.stdout, done.stderr, results(out, "report.json", "dead.jsonl"))
    assert runs["ray"] == runs["local"]
    returncode, stdout, stderr, _ = runs["local"]
    assert returncode == 2  # the cut .gz is named as failed, the others migrated
    assert b"rank9999-cut.log.gz" in stderr
    assert stdout.count(b'"event":"kv_pool.allocation"') > 200


def test_migrate_into_a_directory_writes_each_file_as_locally(cluster: Cluster, tmp_path: Path) -> None:
    logs = fleet_logs(tmp_path / "logs", CORPUS, 24)[:-1]
    for engine, options in (("local", []), ("ray", on_the(cluster))):
        done = kvlog("migrate", *logs, "-o", tmp_path / engine, "--format", "text", *options)
        assert done.returncode == 0, done.stderr
    local = {path.name: path.read_bytes() for path in (tmp_path / "local").iterdir()}
    remote = {path.name: path.read_bytes() for path in (tmp_path / "ray").iterdir()}
    assert remote == local
    assert len(local) == len(logs)  # one output a file, no temporary left beside them


def test_validate_on_the_cluster_reports_as_the_local_run(cluster: Cluster, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    made = kvlog("migrate", *sorted(CORPUS.glob("*.log")), "--only-events")
    assert made.returncode == 0, made.stderr
    events.write_bytes(made.stdout)
    big = tmp_path / "big.jsonl"  # over 16 MiB: validated in byte ranges, one task each
    with big.open("wb") as out:
        while out.tell() < 17 << 20:
            out.write(events.read_bytes())
        out.write(b'{"event":"kv_arena.closed","schema_version":1}\n')
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"event":"kv_pool.allocation"}\nnot json\n')
    inputs = [events, big, broken, tmp_path / "missing.jsonl"]
    local = kvlog("validate", *inputs)
    remote = kvlog("validate", *inputs, *on_the(cluster))
    assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, local.stdout, local.stderr)
    assert local.returncode == 2
    assert b"big.jsonl:" in local.stdout


def test_a_node_killed_mid_run_loses_and_duplicates_nothing(cluster: Cluster, tmp_path: Path) -> None:
    logs = fleet_logs(tmp_path / "logs", CORPUS, 200, repeat=40)[:-1]
    expected = kvlog("migrate", *logs, "-o", tmp_path / "local")
    assert expected.returncode == 0, expected.stderr
    node = cluster.start_node(head=False)
    cluster.wait_for_nodes(3)
    out = tmp_path / "ray"
    run = subprocess.Popen(
        [*PYTHON_M_KVLOG, "migrate", *map(str, logs), "-o", str(out), *on_the(cluster)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENVIRONMENT,
    )
    while run.poll() is None and len(list(out.glob("*.log"))) < 20:
        time.sleep(0.05)
    written_at_kill = len(list(out.glob("*.log")))
    Cluster.kill(node)
    _, stderr = run.communicate(timeout=600)
    assert written_at_kill < len(logs), "the run ended before the node was killed: nothing was tested"
    assert run.returncode == expected.returncode, stderr
    local = {path.name: path.read_bytes() for path in (tmp_path / "local").iterdir()}
    remote = {path.name: path.read_bytes() for path in out.iterdir()}
    assert remote == local


def test_a_directory_is_expanded_and_mirrored_under_the_output_as_locally(cluster: Cluster, tmp_path: Path) -> None:
    """One expansion for every engine: ``-o DIR/`` keeps each node's path, and validate walks a directory."""
    fleet = tmp_path / "fleet"
    for node in ("node1", "node2"):
        (fleet / node).mkdir(parents=True)
        (fleet / node / "server.log").write_bytes((CORPUS / "gen2_2025.log").read_bytes())
    for engine, options in (("local", []), ("ray", on_the(cluster))):
        done = kvlog("migrate", fleet, "-o", f"{tmp_path / engine}/", "--format", "text", *options)
        assert done.returncode == 0, done.stderr
    local = {str(p.relative_to(tmp_path / "local")): p.read_bytes() for p in (tmp_path / "local").rglob("*.log")}
    remote = {str(p.relative_to(tmp_path / "ray")): p.read_bytes() for p in (tmp_path / "ray").rglob("*.log")}
    assert remote == local
    assert sorted(local) == ["node1/server.log", "node2/server.log"]
    events = tmp_path / "events" / "deeper"
    events.mkdir(parents=True)
    (events / "a.jsonl").write_bytes(kvlog("migrate", fleet, "--only-events").stdout)
    walked = [kvlog("validate", tmp_path / "events", *options) for options in ([], on_the(cluster))]
    assert walked[0].returncode == 0 and b" events, 0 invalid" in walked[0].stderr
    assert (walked[1].returncode, walked[1].stdout, walked[1].stderr) == (0, walked[0].stdout, walked[0].stderr)


def test_a_worker_killed_mid_task_changes_no_byte_of_any_stream(cluster: Cluster, tmp_path: Path) -> None:
    """The driver printed the raylet's "A worker died or was killed" onto standard output, the events stream."""
    logs = fleet_logs(tmp_path / "logs", CORPUS, 8, repeat=400)[:-1]
    expected = kvlog("migrate", *logs, "--jobs", "1")
    assert expected.returncode == 0, expected.stderr
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"  # files: a full pipe would stop the run
    with stdout.open("wb") as out, stderr.open("wb") as err:
        run = subprocess.Popen(
            [*PYTHON_M_KVLOG, "migrate", *map(str, logs), *on_the(cluster)],
            stdout=out,
            stderr=err,
            env=ENVIRONMENT,
        )
        killed = False
        while run.poll() is None and not killed:
            killed = cluster.kill_a_task_worker()
            time.sleep(0.05)
        run.wait(timeout=600)
    assert killed, "the run ended before a task was seen running: nothing was tested"
    assert (run.returncode, stdout.read_bytes(), stderr.read_bytes()) == (0, expected.stdout, expected.stderr)
