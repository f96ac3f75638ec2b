"""``kvlog follow --metrics-port``'s acceptance: a real Prometheus scrapes it while old-format lines are appended."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import orjson
from cli_harness import SCRIPT
from follow_helpers import CORPUS, append, migrated
from prometheus_helpers import Series, free_port, require, running_prometheus

KVLOG = str(SCRIPT)
LOG = (CORPUS / "postcapture_before_fix_2026_07.log").read_text().splitlines(keepends=True)
#: two runs of a server before sglang's fix; the second's pools wait for a post-capture line that never comes, and
#: are shown once the hold (2 s here) is over
FIRST_RUN, SECOND_RUN = "".join(LOG[:17]), "".join(LOG[17:25])


def pool_bytes(events: list[dict[str, Any]], state: str) -> dict[tuple[str, str], int]:
    """(tp, label) -> K+V bytes of the pools in ``state``, from the events themselves."""
    return {
        (str(e["ranks"]["tp"]), e["label"] or ""): e["k_bytes"] + e["v_bytes"]
        for e in events
        if e["event"] == "kv_pool.allocation" and e["allocation_state"] == state
    }


def scraped(series: Series) -> dict[tuple[str, str], int]:
    return {(s["metric"].get("tp", ""), s["metric"].get("label", "")): int(s["value"][1]) for s in series}


def events_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in migrated(path)]


def test_prometheus_scraping_follow_shows_the_upper_bound_and_free_memory_across_a_rotation(tmp_path: Path) -> None:
    binary = require("prometheus")
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "server.log"
    log.touch()
    port = free_port()
    follower = subprocess.Popen(
        [KVLOG, "follow", str(logs / "*.log"), "--metrics-port", str(port), "--hold", "2", "-o", "/dev/null"],
        stderr=subprocess.PIPE,
    )
    try:
        with running_prometheus(binary, [f"http://127.0.0.1:{port}/metrics"], tmp_path) as prometheus:
            append(log, FIRST_RUN)
            first = events_of(log)
            expected = pool_bytes(first, "va_upper_bound")
            assert expected == {("0", ""): 79199196938, ("1", ""): 79199196938}
            va = 'kvlog_kv_pool_bytes{allocation_state="va_upper_bound"}'
            assert scraped(prometheus.wait_for(va, lambda s: scraped(s) == expected, "the VA pools")) == expected
            last_free = [e for e in first if e["event"] == "kv_memory.pool_end" and e["ranks"] == {"tp": 0}][-1]
            prometheus.wait_for(
                'kvlog_memory_avail_bytes{stage="kv_memory.pool_end",tp="0"}',
                lambda s: [int(x["value"][1]) for x in s] == [last_free["avail_bytes"]],
                "the free memory the last pool-end line states",
            )

            log.rename(logs / "server.log.1")  # logrotate's rename: *.log no longer names it
            log.write_text(SECOND_RUN)
            rotated = pool_bytes(events_of(log), "va_upper_bound")
            assert rotated == {("0", "SWA"): 8697308774, ("0", "Full"): 10866267258}
            tp0 = 'kvlog_kv_pool_bytes{allocation_state="va_upper_bound",tp="0"}'
            shown = prometheus.wait_for(tp0, lambda s: scraped(s) == rotated, "the new run's pools after rotation")
            assert scraped(shown) == rotated  # the restarted rank's old pool is gone: its run was replaced
    finally:
        follower.send_signal(signal.SIGTERM)
        _, stderr = follower.communicate(timeout=30)
    assert follower.returncode == 0, stderr
    assert f"serving metrics at http://127.0.0.1:{port}/metrics" in stderr.decode()
