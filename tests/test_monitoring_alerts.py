"""The shipped alert expressions over series MemorySeries made from real events, evaluated by promtool.

The input series are not written by hand: they are ``MemorySeries.samples()`` of the corpus logs as
``kvlog migrate`` reads them, and of live events of ranks that only a label beyond ``tp`` tells apart
(``MOE_DP``). Each alert's expression (read from ``kvlog_alerts.yml``) must give exactly the samples
worked out by hand from those events: the labels it joins on must be labels the series have, and two
ranks or two pools must never meet in one match group (promtool fails a many-to-many match).
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_helpers import require

from kvlog.commands import migrate
from kvlog.metrics import MemorySeries

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "monitoring" / "kvlog_alerts.yml"
GIB = 1 << 30
SCRAPE = {"job": "kvlog", "instance": "127.0.0.1:9400"}


def _live_moe_dp_run(series: MemorySeries) -> None:
    """Two MOE_DP ranks of one live engine, each over its post-capture budget with one arena off its measurement."""
    for rank in (0, 1):
        scope = {"ranks": {"moe_dp": rank}, "level": "info"}
        for event in (
            {"event": "weights.load_begin", "avail_bytes": 140 * GIB},
            {"event": "kv_pool.allocation", "pool": None, "label": None, "allocation_state": "allocated",
             "k_bytes": 8 * GIB, "v_bytes": 8 * GIB, "num_tokens": 1000, "committed_bytes": None},
            {"event": "kv_pool.post_capture_sized", "pool": None, "label": None, "committed_bytes": (16 + rank) * GIB,
             "budget_bytes": 15 * GIB, "max_total_num_tokens": 900, "free_bytes": GIB},
            {"event": "kv_arena.commit", "arena_id": "0", "committed_bytes": GIB,
             "measured_committed_bytes": GIB + (128 + rank) * (1 << 20)},
        ):  # fmt: skip
            series.observe({**scope, **event}, instance="live")


def _live_target_and_draft(series: MemorySeries) -> None:
    """A rank whose target (64 GiB) and draft (40 GiB) pools, both unnamed, are over 100 GiB together only."""
    for size in (64, 40):
        event = {"event": "kv_pool.allocation", "pool": None, "label": None, "allocation_state": "allocated",
                 "k_bytes": size * GIB // 2, "v_bytes": size * GIB // 2, "ranks": {"tp": 3}}  # fmt: skip
        series.observe(event, instance="spec")


def _corpus_series() -> MemorySeries:
    series = MemorySeries()
    for log in ("postcapture_before_fix_2026_07.log", "postcapture_after_fix_2026_09.log"):
        out = io.BytesIO()
        migrate(str(ROOT / "tests" / "corpus" / log), only_events=True, stdout=out)
        for line in out.getvalue().splitlines():
            series.observe(json.loads(line), instance=log.split("_20")[0])
    _live_moe_dp_run(series)
    _live_target_and_draft(series)
    return series


def _selector(name: str, labels: dict[str, str]) -> str:
    shown = ",".join(f'{key}="{value}"' for key, value in sorted({**labels, **SCRAPE}.items()) if value != "")
    return f"{name}{{{shown}}}"


def _alert_exprs() -> dict[str, str]:
    rules = yaml.safe_load(RULES.read_text())
    return {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}


def _expected(name: str, value: float, **labels: str) -> dict[str, Any]:
    return {"labels": _selector(name, labels), "value": value}


BEFORE = {"server_instance": "postcapture_before_fix", "server": "sglang"}
AFTER = {"server_instance": "postcapture_after_fix", "server": "sglang"}
LIVE = {"server_instance": "live", "server": "kvlog"}
VA = {"allocation_state": "va_upper_bound"}
#: worked out from the events: K+V of each pool that printed only an address-space bound, never committed
#: bytes, at the end of its rank's last run (before_fix line 8 for TP1; lines 36-37 after TP0's last restart)
EXPECTED = {
    "KvPoolAddressSpaceReportedAsSize": [
        _expected("kvlog_kv_pool_bytes", 79199196938, **BEFORE, **VA, tp="1", pool="#0"),
        _expected("kvlog_kv_pool_bytes", 2 * 2179695903, **BEFORE, **VA, tp="0", pool="SWA", label="SWA"),
        _expected("kvlog_kv_pool_bytes", 2 * 2716566815, **BEFORE, **VA, tp="0", pool="Full", label="Full"),
        _expected("kvlog_kv_pool_bytes", 8697308774, **AFTER, **VA, tp="0", pool="SWA", label="SWA"),
        _expected("kvlog_kv_pool_bytes", 10866267258, **AFTER, **VA, tp="0", pool="Full", label="Full"),
        _expected("kvlog_kv_pool_bytes", 33006823670, **AFTER, **VA, tp="10", pool="#0"),
        _expected("kvlog_kv_pool_bytes", 49520972922, **AFTER, **VA, tp="0", dp="0", pool="#0"),
    ],
    "KvPoolCommittedOverBudget": [
        _expected("kvlog_kv_pool_committed_bytes", 16 * GIB, **LIVE, other_ranks="moe_dp=0", pool="#0"),
        _expected("kvlog_kv_pool_committed_bytes", 17 * GIB, **LIVE, other_ranks="moe_dp=1", pool="#0"),
    ],
    "KvPoolCommittedOverThreshold": [
        {"labels": '{server="kvlog",server_instance="spec",tp="3"}', "value": 104 * GIB},
    ],
    "KvArenaBookkeepingDisagreesWithDriver": [
        {"labels": _selector("", {**LIVE, "other_ranks": f"moe_dp={rank}", "arena": "0"}), "value": (128 + rank) << 20}
        for rank in (0, 1)
    ],
}


def test_alert_expressions_on_series_made_from_real_events(tmp_path: Path) -> None:
    promtool = require("promtool")
    series = _corpus_series()
    inputs = [
        {"series": _selector(metric.name, labels), "values": f"{value:.0f}x10"}
        for metric, labels, value in series.samples()
    ]
    exprs = _alert_exprs()
    tests = [{"expr": exprs[alert], "eval_time": "5m", "exp_samples": samples} for alert, samples in EXPECTED.items()]
    (tmp_path / "rules.yml").write_text("groups: []\n")
    test_file = tmp_path / "test.yml"
    unit = {"interval": "1m", "input_series": inputs, "promql_expr_test": tests}
    test_file.write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "tests": [unit]}))
    done = subprocess.run([promtool, "test", "rules", str(test_file)], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
