"""A real Ray cluster of raylets on loopback for the fleet tests: ``ray start`` nodes, each its own session."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")
#: loopback test clusters run without token authentication (Ray 2.5x enables it for ``ray start``)
ENVIRONMENT = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
START_TIMEOUT_S = 180.0
#: how long a node is given to end on SIGTERM before its process group is killed
STOP_GRACE_S = 5
QUIET_AND_BLOCKING = ("--disable-usage-stats", "--block")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """A head node and worker nodes, each a ``ray start --block`` process group of its own."""

    def __init__(self, log_directory: Path, environment: dict[str, str] | None = None) -> None:
        #: the nodes' environment, which their Ray workers inherit (a benchmark points it at a source tree)
        self.environment = environment or ENVIRONMENT
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._logs = log_directory
        self._nodes: list[subprocess.Popen[bytes]] = []

    def start_node(self, *, head: bool) -> subprocess.Popen[bytes]:
        where = (
            ["--head", f"--port={self.port}", "--include-dashboard=false"] if head else [f"--address={self.address}"]
        )
        log = (self._logs / f"node-{len(self._nodes)}.log").open("wb")
        node = subprocess.Popen(
            [
                str(RAY),
                "start",
                *where,
                "--node-ip-address=127.0.0.1",
                "--num-cpus=1",
                "--disable-usage-stats",
                "--block",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.environment,
            start_new_session=True,
        )
        self._nodes.append(node)
        return node

    def wait_for_nodes(self, count: int) -> None:
        """Until ``count`` nodes are alive, as a driver connecting to the address sees them."""
        probe = (
            f"import ray; ray.init(address={self.address!r}, logging_level=40, log_to_driver=False); "
            "print(sum(n['Alive'] for n in ray.nodes()))"
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            seen = subprocess.run(
                [sys.executable, "-c", probe],
                capture_output=True,
                text=True,
                env=self.environment,
                timeout=120,
                check=False,
            )
            if seen.returncode == 0 and seen.stdout.strip() == str(count):
                return
            time.sleep(1)
        logs = "\n".join(path.read_text(errors="replace")[-2000:] for path in sorted(self._logs.glob("node-*.log")))
        raise AssertionError(f"the Ray cluster at {self.address} did not reach {count} live nodes:\n{logs}")

    def kill_a_task_worker(self, title: str = "ray::_run") -> bool:
        """SIGKILL one of the nodes' Ray workers whose process title is ``title`` (running that task now)."""
        import psutil  # noqa: PLC0415 - Ray's dependency

        for node in self._nodes:
            with contextlib.suppress(psutil.Error):
                for process in psutil.Process(node.pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if process.cmdline()[:1] == [title]:
                            process.send_signal(signal.SIGKILL)
                            return True
        return False

    @staticmethod
    def kill(node: subprocess.Popen[bytes]) -> None:
        """SIGKILL a node's whole process group (its raylet, its workers): a machine lost mid-run."""
        os.killpg(node.pid, signal.SIGKILL)
        node.wait()

    def stop(self) -> None:
        for node in reversed(self._nodes):
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGTERM)
        # one grace for all the nodes, not one each: they end on SIGTERM side by side
        deadline = time.monotonic() + STOP_GRACE_S
        for node in self._nodes:
            try:
                # a head some driver connected to takes ~30 s to end on SIGTERM; its group's SIGKILL then
                # ends every process of the node (raylet, GCS, workers) all the same, and at once
                node.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()


@contextmanager
def ray_cluster(log_directory: Path, workers: int, environment: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A head and ``workers`` worker nodes, all alive; everything stopped at the end."""
    cluster = Cluster(log_directory, environment)
    try:
        cluster.start_node(head=True)
        if workers:  # a worker started with its head timed out waiting for its own agents on a loaded machine
            cluster.wait_for_nodes(1)
        for _ in range(workers):
            cluster.start_node(head=False)
        cluster.wait_for_nodes(1 + workers)
        yield cluster
    finally:
        cluster.stop()


def fleet_logs(directory: Path, corpus: Path, count: int, repeat: int = 1) -> list[Path]:
    """``count`` old server logs (the corpus's, each ``repeat`` times over), some gzipped, one .gz cut short."""
    import gzip  # noqa: PLC0415 - only the fleet tests write these

    sources = sorted(corpus.glob("*.log"))
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    for index in range(count):
        source = sources[index % len(sources)]
        data = source.read_bytes() * repeat
        if index % 10 == 3:
            path = directory / f"rank{index:04d}-{source.stem}.log.gz"
            path.write_bytes(gzip.compress(data))
        else:
            path = directory / f"rank{index:04d}-{source.stem}.log"
            path.write_bytes(data)
        made.append(path)
    cut = directory / "rank9999-cut.log.gz"
    cut.write_bytes(gzip.compress(sources[0].read_bytes() * 4)[:200])
    made.append(cut)
    return made
