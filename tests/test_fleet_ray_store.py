"""``--engine ray`` reading from and writing to object storage: every byte as ``--jobs 1`` on local files.

A moto S3 server and a real cluster of two raylets run on loopback; the nodes are started with the
``AWS_*`` variables that point at the server, as an operator's nodes get their credentials, and
each task reads its input from the store and writes its output object itself.
"""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("ray")

from cli_harness import kvlog as in_process
from cli_harness import kvlog_process
from fleet_helpers import ENVIRONMENT, Cluster, fleet_logs
from store_helpers import BUCKET, CORPUS, S3, upload


@pytest.fixture
def store_and_cluster(cluster: Cluster, cluster_store: S3, monkeypatch: pytest.MonkeyPatch) -> tuple[S3, Cluster]:
    """The shared cluster, whose nodes were started pointed at ``cluster_store`` (tests/conftest.py)."""
    for name, value in cluster_store.environment.items():
        monkeypatch.setitem(ENVIRONMENT, name, value)  # the driver sees the server as the nodes and workers do
    return cluster_store, cluster


def kvlog(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    """``kvlog ARGS...``: on the cluster as a process (its streams are compared), on this machine in this one."""
    if "--ray-address" in args:
        return kvlog_process(*args, env=ENVIRONMENT, timeout=600)
    return in_process(*args)


def test_migrate_on_the_cluster_from_and_to_the_store_is_the_local_run(
    store_and_cluster: tuple[S3, Cluster], tmp_path: Path
) -> None:
    s3, cluster = store_and_cluster
    logs = fleet_logs(tmp_path / "logs", CORPUS, 30)  # some gzipped, one .gz cut short
    upload(s3, logs, "fleet/in/")
    local = tmp_path / "local"
    expected = kvlog(
        "migrate", *logs, "-o", f"{local}/", "--format", "text", "--report", tmp_path / "report.json",
        "--dead-letter", tmp_path / "dead.jsonl", "--jobs", "1",
    )  # fmt: skip
    stored = f"s3://{BUCKET}/fleet/"
    done = kvlog(
        "migrate", f"{stored}in/*.log*", "-o", f"{stored}out/", "--format", "text", "--report", f"{stored}report.json",
        "--dead-letter", f"{stored}dead.jsonl", "--engine", "ray", "--ray-address", cluster.address,
    )  # fmt: skip

    def as_stored(data: bytes) -> bytes:  # the inputs named by their URIs instead of their paths
        return data.replace(f"{logs[0].parent}/".encode(), f"{stored}in/".encode())

    assert (done.returncode, done.stderr) == (expected.returncode, as_stored(expected.stderr))
    assert expected.returncode == 2  # the cut .gz is named as failed, the others migrated
    assert f"{stored}in/rank9999-cut.log.gz: cannot read".encode() in done.stderr
    outputs = {path.name: path.read_bytes() for path in local.iterdir()}
    assert {key.rpartition("/")[2]: s3.get(key) for key in s3.keys("fleet/out/")} == outputs
    assert len(outputs) == len(logs) - 1  # no object for the cut input, not even a partial one
    for name in ("report.json", "dead.jsonl"):
        assert s3.get(f"fleet/{name}") == as_stored((tmp_path / name).read_bytes())
    assert s3.uploads_in_progress() == []


def test_validate_on_the_cluster_of_a_store_glob_reports_as_the_local_run(
    store_and_cluster: tuple[S3, Cluster], tmp_path: Path
) -> None:
    s3, cluster = store_and_cluster
    made = kvlog("migrate", *sorted(CORPUS.glob("*.log")), "--only-events")
    broken = tmp_path / "a-broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"event":"kv_pool.allocation"}\nnot json\n' + made.stdout))
    events = tmp_path / "b-events.jsonl"
    events.write_bytes(made.stdout)
    stored = upload(s3, [broken, events], "validate/")[0].rpartition("/")[0] + "/"
    local = kvlog("validate", broken, events)
    remote = kvlog("validate", f"{stored}*.jsonl*", "--engine", "ray", "--ray-address", cluster.address)
    named = [output.replace(f"{tmp_path}/".encode(), stored.encode()) for output in (local.stdout, local.stderr)]
    assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, *named)
    assert local.returncode == 1
    assert f"{stored}a-broken.jsonl.gz:2:".encode() in remote.stdout
