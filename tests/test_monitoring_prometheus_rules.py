"""The shipped alerting rules and Grafana dashboard work against kvlog's real metrics.

- ``promtool check rules`` and ``promtool test rules`` run on ``examples/monitoring`` as shipped.
- Every dashboard query, with its template variables filled in as Grafana does, is parsed by promtool
  (as a recording rule) and then evaluated by a real Prometheus scraping a kvlog endpoint fed with the
  corpus logs: each query must succeed, and the panels a user reads first must show the corpus bytes.
- The dashboard's structure: unique panel ids, a grid without overlaps, defined variables, known metrics.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_helpers import require, running_prometheus

from kvlog.commands import ledger, migrate
from kvlog.metrics import METRICS, LedgerFigures, MemorySeries
from kvlog.metrics.prometheus import start_endpoint

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "monitoring"
RULES = EXAMPLES / "kvlog_alerts.yml"
RULES_TEST = EXAMPLES / "kvlog_alerts_test.yml"
DASHBOARD = EXAMPLES / "grafana" / "kvlog-kv-memory.json"
PROVIDER = EXAMPLES / "grafana" / "provisioning.yml"

NAMES = {metric.name for metric in METRICS}
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range"}
#: what Grafana puts in place of each variable: the "All" value of the multi-value ones, a duration
FILLED = {"server_instance": ".*", "tp": ".*", "__rate_interval": "1m", "__interval": "1m", "__range": "1h"}


@pytest.fixture(scope="module")
def promtool() -> str:
    return require("promtool")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def exprs() -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in panels() for target in panel["targets"]]


def variables_in(text: str) -> set[str]:
    return set(re.findall(r"\$\{?(\w+)", text))


def filled(expr: str) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda match: FILLED[match.group(1)], expr)


def metrics_in(expr: str) -> set[str]:
    return set(re.findall(r"\bkvlog_\w+", expr))


def test_alert_rules_pass_promtool_check(promtool: str) -> None:
    done = subprocess.run([promtool, "check", "rules", str(RULES)], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout


def test_alert_rules_pass_their_unit_tests(promtool: str) -> None:
    command = [promtool, "test", "rules", RULES_TEST.name]  # run beside the rules, as its rule_files name them
    done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=EXAMPLES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rules_and_dashboard_name_only_metrics_kvlog_exports() -> None:
    rules = yaml.safe_load(RULES.read_text())
    named = {name for group in rules["groups"] for rule in group["rules"] for name in metrics_in(rule["expr"])}
    named |= {name for _, expr in exprs() for name in metrics_in(expr)}
    assert named - NAMES == set()
    unused = {metric.name for metric in METRICS} - {name for _, expr in exprs() for name in metrics_in(expr)}
    assert unused == set(), "every exported metric has a panel"


def test_dashboard_structure() -> None:
    board = dashboard()
    assert isinstance(board["schemaVersion"], int)
    assert board["uid"] and board["title"]
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert {"x", "y", "w", "h"} <= grid.keys() and all(isinstance(grid[key], int) for key in "xywh")
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        covered = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not covered & cells, f"{panel['title']} overlaps another panel"
        cells |= covered
    for panel in panels():
        assert panel["targets"], panel["title"]
        assert len({target["refId"] for target in panel["targets"]}) == len(panel["targets"])
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_dashboard_variables_are_defined() -> None:
    board = dashboard()
    defined = {variable["name"] for variable in board["templating"]["list"]}
    assert defined == {"datasource", "server_instance", "tp"}
    datasource = next(v for v in board["templating"]["list"] if v["name"] == "datasource")
    assert (datasource["type"], datasource["query"]) == ("datasource", "prometheus")
    used = variables_in(json.dumps(board["panels"])) | variables_in(json.dumps(board["templating"]))
    assert used - GRAFANA_BUILTINS <= defined
    assert {"server_instance", "tp"} <= used


def test_va_upper_bounds_are_drawn_apart_from_memory() -> None:
    """The VA upper bound series are dashed, unstacked and coloured apart, never stacked with memory."""
    for panel in panels():
        va = {t["refId"] for t in panel["targets"] if "va_upper_bound" in t["expr"] or "reserved_va" in t["expr"]}
        if not va or panel["type"] != "timeseries":
            continue
        styled = {
            override["matcher"]["options"]: {prop["id"]: prop["value"] for prop in override["properties"]}
            for override in panel["fieldConfig"]["overrides"]
            if override["matcher"]["id"] == "byFrameRefID"
        }
        for ref in va:
            assert styled[ref]["custom.lineStyle"]["fill"] == "dash", panel["title"]
            assert styled[ref]["custom.stacking"]["mode"] == "none", panel["title"]


def test_provider_file_points_grafana_at_a_dashboard_folder() -> None:
    provider = yaml.safe_load(PROVIDER.read_text())
    assert provider["apiVersion"] == 1
    (only,) = provider["providers"]
    assert only["type"] == "file" and only["options"]["path"]


def test_every_dashboard_query_parses(promtool: str, tmp_path: Path) -> None:
    recorded = [{"record": f"panel:q{index}", "expr": filled(expr)} for index, (_, expr) in enumerate(exprs())]
    rules = {"groups": [{"name": "dashboard", "rules": recorded}]}
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump(rules))
    done = subprocess.run([promtool, "check", "rules", str(path)], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


CORPUS = ("postcapture_before_fix_2026_07.log", "hybrid_swa_2026.log")


def corpus_series() -> MemorySeries:
    series = MemorySeries(ledger=LedgerFigures())  # as kvlog follow and kvlog integrate feed it
    for log in CORPUS:
        out = io.BytesIO()
        migrate(str(ROOT / "tests" / "corpus" / log), only_events=True, stdout=out)
        for line in out.getvalue().splitlines():
            series.observe(json.loads(line), instance=log)
    return series


def test_dashboard_and_alert_queries_on_a_real_prometheus(tmp_path: Path) -> None:
    binary = require("prometheus")
    series = corpus_series()
    with start_endpoint(series, port=0) as endpoint, running_prometheus(binary, [endpoint.url], tmp_path) as server:
        first = panels()[0]
        allocated, va = (filled(target["expr"]) for target in first["targets"])
        server.wait_for(va, lambda result: len(result) > 0, "the corpus pools")
        for _, expr in exprs():
            server.query(filled(expr))  # each query is accepted: query() fails the test on a rejected one
        want = {
            (labels["server_instance"], labels["tp"], labels["pool"]): value
            for metric, labels, value in series.samples()
            if metric.name == "kvlog_kv_pool_bytes" and labels["allocation_state"] == "va_upper_bound"
        }
        got = {
            (s["metric"]["server_instance"], s["metric"]["tp"], s["metric"]["pool"]): float(s["value"][1])
            for s in server.query(va)
        }
        assert got == want
        assert server.query(allocated), "the allocated pools show too"
        # the alert's condition on the pre-fix log: TP1's target pool (never restarted) and TP0's last
        # hybrid pools report only address space
        rules = yaml.safe_load(RULES.read_text())
        (alert,) = [
            r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "KvPoolAddressSpaceReportedAsSize"
        ]
        firing = {
            (s["metric"]["tp"], s["metric"]["pool"])
            for s in server.query(alert["expr"])
            if s["metric"]["server_instance"] == "postcapture_before_fix_2026_07.log"
        }
        assert firing == {("1", "#0"), ("0", "SWA"), ("0", "Full")}
        (stacked, *_) = [panel for panel in panels() if panel["title"].startswith("Where the device memory went")]
        held = {
            (s["metric"]["server_instance"], s["metric"]["tp"], s["metric"]["consumer"]): float(s["value"][1])
            for s in server.query(filled(stacked["targets"][0]["expr"]))
        }
        want = ledger_memory()
        assert {consumer for _, _, consumer in want} == {"kv_committed"}  # the last runs state no other consumer
        assert held == want, "the ledger panel shows what kvlog ledger says of each rank's last run"


def ledger_memory() -> dict[tuple[str, str, str], float]:
    """What ``kvlog ledger`` says each rank's last run of the corpus logs held, by consumer (kv_committed too)."""
    table = io.BytesIO()
    ledger([str(ROOT / "tests" / "corpus" / log) for log in CORPUS], output_format="json", stdout=table)
    last = {(Path(row["source"]).name, row["ranks"]): row for row in json.loads(table.getvalue())["rows"]}
    held = {}
    for (log, ranks), row in last.items():
        stated = {**row["consumers"], "kv_committed_bytes": row["kv_committed_bytes"]}
        for name, value in stated.items():
            if value is not None:  # a consumer no line states has no series
                held[(log, ranks.removeprefix("TP"), name.removesuffix("_bytes"))] = float(value)
    return held
