"""A real Prometheus server for tests: started on loopback, scraping given targets every second.

Reusable for any kvlog endpoint (``kvlog.metrics.serve``, ``kvlog follow --metrics-port``): start it
with ``running_prometheus(binary, [url], tmp_path)`` and poll its HTTP API with ``wait_for``.
The waits are bounds on how long a correct run may take, never what a test measures.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

WAIT_S = 60.0

Series = list[dict[str, Any]]


def require(name: str) -> str:
    """The path of binary ``name``; a missing one fails the test under CI and skips it elsewhere."""
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed, and CI must run the monitoring proofs (.ci/run installs it)")
        pytest.skip(f"{name} is not installed (apt-get install prometheus)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Prometheus:
    """A running Prometheus: its API address, and its log for failure messages."""

    url: str
    log: Path

    def query(self, expr: str) -> Series:
        """The instant vector ``expr`` evaluates to now (``[]`` while Prometheus is not up); fails on a bad query."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(address, timeout=5) as response:
                body = json.load(response)
        except urllib.error.HTTPError as rejected:  # a query Prometheus cannot parse or evaluate
            if rejected.code == 503:  # starting: its storage is not ready to answer yet
                return []
            pytest.fail(f"Prometheus rejected {expr!r}: {rejected.read().decode(errors='replace')}")
        except (urllib.error.URLError, OSError):  # not listening yet
            return []
        assert body["status"] == "success", body
        result: Series = body["data"]["result"]
        return result

    def wait_for(self, expr: str, done: Callable[[Series], bool], what: str) -> Series:
        """Poll ``expr`` until ``done`` holds for its result; fail naming ``what`` after ``WAIT_S``."""
        deadline = time.monotonic() + WAIT_S
        while True:
            result = self.query(expr)
            if done(result):
                return result
            if time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                pytest.fail(f"Prometheus never showed {what} within {WAIT_S:.0f} s; last {expr!r}: {result}\n{tail}")
            time.sleep(0.25)


@contextmanager
def running_prometheus(binary: str, targets: list[str], workdir: Path) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (``http://host:port/metrics`` URLs) every second, stopped on exit."""
    static = [urllib.parse.urlsplit(target) for target in targets]
    config = workdir / "prometheus.yml"
    jobs = [
        {
            "job_name": f"kvlog{index}",
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "metrics_path": parts.path or "/metrics",
            "static_configs": [{"targets": [parts.netloc]}],
        }
        for index, parts in enumerate(static)
    ]
    config.write_text(json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": jobs}))  # JSON is YAML
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:
        server.wait_for("up", lambda result: len(result) == len(targets), "its scrape targets")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
