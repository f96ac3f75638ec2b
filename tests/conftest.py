"""Settings and fixtures every test shares.

Nothing is kept across runs (``kvlog.schema.stored``) unless a test sets ``KVLOG_CACHE_DIR`` itself:
what a test checks is then computed by the code under test, never read back from an earlier run, an
earlier checkout or an earlier mutant of it. Subprocesses inherit the setting.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from typing import TYPE_CHECKING

import pytest

os.environ["KVLOG_CACHE_DIR"] = ""

# How a test runs the CLI, in process or as a process: tests/cli_harness.py (TESTING.md says when).

if TYPE_CHECKING:
    from fleet_helpers import Cluster
    from store_helpers import S3

    from kvlog.schema.event_validator import EventValidator


@pytest.fixture(scope="module")
def validator() -> EventValidator:
    """One validator for a module's tests: building one compiles the whole catalog."""
    from kvlog.schema.event_validator import EventValidator  # noqa: PLC0415 - this file is read before any test

    return EventValidator()


class _RayNodes:
    """The Ray cluster the fleet tests share, and the S3 server its workers are pointed at.

    A cluster of two raylets takes ~20 s to start and ~5 s to stop on the 2-core CI machine; each Ray test
    module started its own. One is started by the first test that asks for it and stopped after the last
    test of a run of such tests (``pytest_runtest_teardown``), so none idles while the rest of the suite
    runs: the modules that use it sort next to each other (``test_fleet_ray*.py``). Its nodes' workers
    read and write object storage through the variables they were started with, so the S3 server (when
    the fleet extra is installed) is started first and lives as long.
    """

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self.cluster: Cluster | None = None
        self.s3: S3 | None = None

    def start(self, factory: pytest.TempPathFactory) -> Cluster:
        from fleet_helpers import ENVIRONMENT, ray_cluster  # noqa: PLC0415 - only the fleet tests need Ray
        from store_helpers import s3_server_alone  # noqa: PLC0415

        if self.cluster is None:
            with contextlib.ExitStack() as stack:
                environment = dict(ENVIRONMENT)
                if importlib.util.find_spec("s3fs") is not None:
                    self.s3 = stack.enter_context(s3_server_alone())
                    environment.update(self.s3.environment)
                self.cluster = stack.enter_context(ray_cluster(factory.mktemp("ray-nodes"), 1, environment))
                self._stack = stack.pop_all()
        return self.cluster

    def stop(self) -> None:
        stack, self._stack, self.cluster, self.s3 = self._stack, None, None, None
        if stack is not None:
            stack.close()


_RAY_NODES = _RayNodes()


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """A head and a worker node on loopback, shared with the next tests that ask (``_RayNodes``)."""
    pytest.importorskip("ray")
    return _RAY_NODES.start(tmp_path_factory)


@pytest.fixture
def cluster_store(cluster: Cluster) -> S3:
    """The S3 server the shared cluster's workers reach, with the bucket ``BUCKET``."""
    if _RAY_NODES.s3 is None:
        pytest.skip("object storage needs the fleet extra (s3fs)")
    return _RAY_NODES.s3


#: fixtures costly enough to set up once for the whole run: the tests using each go to one worker
_SHARED_FIXTURES = {
    # two clusters on one loopback would also compete for Ray's fixed ports
    "cluster": "ray-cluster",
    # the mutation tool's whole run over a tiny project: a minute or more of both cores, per worker set up
    "tiny_run": "mutation-tiny-run",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of a costly shared fixture (the Ray cluster) go to one pytest-xdist worker, one after another.

    ``scripts/test`` runs the suite on several workers (``--dist loadgroup``): one group keeps a single
    set-up of each such fixture for all its tests, where each worker would set up its own.
    """
    for item in items:
        for fixture, group in _SHARED_FIXTURES.items():
            if fixture in item.fixturenames:
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared Ray cluster once the next test (if any) does not use it."""
    if _RAY_NODES.cluster is not None and (nextitem is None or "cluster" not in nextitem.fixturenames):
        _RAY_NODES.stop()


def pytest_sessionfinish() -> None:
    """A run cut short (``-x``, Ctrl-C) still stops the cluster."""
    _RAY_NODES.stop()
