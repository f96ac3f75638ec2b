"""kvlog.metrics.serve as an engine uses it: events emitted through kvlog reach a real Prometheus.

The endpoint is read twice: parsed with prometheus_client's own text parser, and scraped by the real
``prometheus`` binary (every second), whose HTTP API must show the emitted bytes exactly and must
drop the previous run's series once a new run (``weights.load_begin``) starts on the rank.
"""

from __future__ import annotations

import io
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_helpers import Series, require, running_prometheus

import kvlog
from kvlog import events
from kvlog.emission import get_config, restore
from kvlog.metrics import MetricsEndpointError, serve
from kvlog.metrics.prometheus import Endpoint

GB = 1 << 30
TARGET = 40 * GB + 12345  # an address-space upper bound: no memory behind it
DRAFT = GB + 777
NEW_RUN = 30 * GB + 1


@pytest.fixture
def emitting() -> Iterator[None]:
    """kvlog configured to write into memory for the test, the previous configuration restored after."""
    saved = get_config()
    kvlog.configure(stream=io.StringIO())
    try:
        yield
    finally:
        kvlog.bind_ranks()
        restore(saved)


@pytest.fixture
def endpoint(emitting: None) -> Iterator[Endpoint]:
    served = serve(port=0, instance="engine-a")
    try:
        yield served
    finally:
        served.close()


def pool(size: int, state: str) -> events.KvPoolAllocation:
    return events.KvPoolAllocation(
        pool=None,
        label=None,
        layout="mla",
        dtype="torch.bfloat16",
        num_tokens=1 << 20,
        allocation_state=state,  # type: ignore[arg-type]
        committed_bytes=None,
        kv_bytes=size,
    )


def first_run() -> None:
    kvlog.bind_ranks(tp=1)
    kvlog.emit(events.WeightsLoadBegin(avail_bytes=139 * GB))
    kvlog.emit(pool(TARGET, "va_upper_bound"))
    kvlog.emit(pool(DRAFT, "allocated"))


def scraped(url: str, timeout: float = 5) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each sample an endpoint serves, by metric name and sorted labels."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def labels(**values: str) -> tuple[tuple[str, str], ...]:
    scope = {"tp": "1", "server": "kvlog", "server_instance": "engine-a"}  # no dp="": a label with no value is left out
    return tuple(sorted({**scope, **values}.items()))


def test_served_exposition_holds_the_emitted_bytes(endpoint: Endpoint) -> None:
    first_run()
    got = scraped(endpoint.url)
    assert got[("kvlog_kv_pool_bytes", labels(allocation_state="va_upper_bound", pool="#0"))] == TARGET
    assert got[("kvlog_kv_pool_bytes", labels(allocation_state="allocated", pool="#1"))] == DRAFT
    assert got[("kvlog_kv_pool_committed_bytes", labels(pool="#1"))] == DRAFT
    assert ("kvlog_kv_pool_committed_bytes", labels(pool="#0")) not in got
    events_total = ("kvlog_events_total", (("event", "kv_pool.allocation"), ("server", "kvlog"),
                                           ("server_instance", "engine-a")))  # fmt: skip
    assert got[events_total] == 2
    assert endpoint.url == f"http://127.0.0.1:{endpoint.port}/metrics"


def test_close_stops_serving_and_feeding(emitting: None) -> None:
    served = serve(port=0, instance="engine-a")
    served.close()
    kvlog.emit(pool(DRAFT, "allocated"))
    assert [s for s in served.series.samples() if s[0].kind == "gauge"] == []  # the tap went with the endpoint
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(served.url, timeout=5)
    again = serve(port=served.port)  # the port was given back
    again.close()
    served.close()  # twice is harmless


def test_a_taken_port_is_a_clear_error(emitting: None) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsEndpointError) as raised:
            serve(port=port)
    assert str(raised.value) == f"cannot serve metrics on 127.0.0.1:{port}: Address already in use"


def test_importing_kvlog_metrics_does_not_load_prometheus_client() -> None:
    code = (
        "import sys, kvlog.metrics\n"
        "kvlog.metrics.MemorySeries(); kvlog.metrics.METRICS\n"
        "assert 'prometheus_client' not in sys.modules\n"
        "kvlog.metrics.serve\n"
        "assert 'prometheus_client' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)


def test_serve_without_prometheus_client_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['prometheus_client'] = None  # as if the extra were not installed\n"
        "import kvlog.metrics\n"
        "try:\n"
        "    kvlog.metrics.serve\n"
        "except kvlog.metrics.MetricsExtraMissing as missing:\n"
        "    print(missing)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout == "Prometheus metrics need prometheus_client: pip install 'kvlog[follow]'\n"


def by_pool(result: Series) -> dict[tuple[str, str], float]:
    return {(s["metric"]["pool"], s["metric"]["allocation_state"]): float(s["value"][1]) for s in result}


def test_real_prometheus_scrapes_the_bytes_and_drops_a_finished_run(endpoint: Endpoint, tmp_path: Path) -> None:
    binary = require("prometheus")
    first_run()
    with running_prometheus(binary, [endpoint.url], tmp_path) as prometheus:
        query = 'kvlog_kv_pool_bytes{server_instance="engine-a", tp="1"}'
        result = prometheus.wait_for(query, lambda r: len(r) == 2, "the first run's two pools")
        assert by_pool(result) == {("#0", "va_upper_bound"): TARGET, ("#1", "allocated"): DRAFT}
        scope = result[0]["metric"]
        assert (scope["server"], scope["job"]) == ("kvlog", "kvlog0")
        assert "dp" not in scope  # an empty label is no label to Prometheus: {dp=""} still matches it
        assert scope["instance"] == f"127.0.0.1:{endpoint.port}"  # Prometheus's own: the scraped target

        kvlog.emit(events.WeightsLoadBegin(avail_bytes=139 * GB))  # a restart on the rank
        kvlog.emit(pool(NEW_RUN, "allocated"))
        result = prometheus.wait_for(
            query, lambda r: by_pool(r) == {("#0", "allocated"): NEW_RUN}, "only the new run's pool"
        )
        committed = prometheus.query('kvlog_kv_pool_committed_bytes{server_instance="engine-a"}')
        assert [float(s["value"][1]) for s in committed] == [NEW_RUN]
