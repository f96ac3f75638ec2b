"""``kvlog follow --metrics-port``'s counters exist at 0 from a log's first sight, with no empty labels.

The real follower and the real endpoint, in-process: the exposition is what Prometheus scrapes.
``KvlogUnparsedLines`` (``increase(kvlog_unparsed_lines_total[15m]) > 0``) can only see the first lines
kvlog cannot read (a new wording at start-up) if a scrape saw the counter at 0 before them;
``examples/monitoring/kvlog_alerts_test.yml`` runs the rule on such series with promtool.
"""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest
from follow_helpers import append, following, wait_for

from kvlog import commands
from kvlog.errors import OptionError

LOAD = "[2026-07-21 09:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"
UNREAD = "[2026-07-21 09:00:02 TP0] KV Cache is allocated. something new: 12.5 GB\n"


def exposition(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def test_a_followed_log_has_its_counters_at_0_before_its_first_unread_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.touch()
    with following(str(log), tmp_path / "events.jsonl", metrics_port=0) as running:
        wait_for(lambda: any("serving metrics at" in notice for notice in running.notices))
        url = next(n for n in running.notices if "serving metrics at" in n).split("serving metrics at ")[1]
        zero = f'kvlog_unparsed_lines_total{{server_instance="{log}"}} 0.0'
        wait_for(lambda: zero in exposition(url), what="the log's counter at 0")  # 1fdc331: absent until counted
        text = exposition(url)
        assert f'kvlog_schema_violations_total{{server_instance="{log}"}} 0.0' in text
        assert f'kvlog_series_folded_total{{label_name="pool",server_instance="{log}"}} 0.0' in text

        append(log, LOAD + UNREAD)
        one = f'kvlog_unparsed_lines_total{{server_instance="{log}"}} 1.0'
        wait_for(lambda: one in exposition(url), what="the unread line counted")
        text = exposition(url)
    avail = [line for line in text.splitlines() if line.startswith("kvlog_memory_avail_bytes{")]
    assert avail == [
        f'kvlog_memory_avail_bytes{{server="sglang",server_instance="{log}",stage="weights.load_begin",tp="0"}} '
        "7.516192768e+10"
    ]
    assert '=""' not in text  # 1fdc331: dp="",ep="",pp="" on every rank's series


def test_follow_bounds_the_label_values_it_is_given(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    pools = "".join(
        f"[2026-08-12 16:31:20 TP0] {name} KV Cache is allocated. dtype: torch.bfloat16, #tokens: 8, "
        "K size: 1.00 GB, V size: 1.00 GB\n"
        for name in ("SWA", "Full", "Extra")
    )
    log.write_text(LOAD + pools)
    with following(str(log), tmp_path / "events.jsonl", metrics_port=0, metrics_label_values=2, hold_s=0.5) as running:
        wait_for(lambda: any("serving metrics at" in notice for notice in running.notices))
        url = next(n for n in running.notices if "serving metrics at" in n).split("serving metrics at ")[1]
        folded = f'kvlog_series_folded_total{{label_name="pool",server_instance="{log}"}} 1.0'
        wait_for(lambda: folded in exposition(url), what="the third pool folded")
        text = exposition(url)
    pools_seen = {
        line.split('pool="')[1].split('"')[0] for line in text.splitlines() if line.startswith("kvlog_kv_pool_bytes{")
    }
    assert pools_seen == {"SWA", "Full", "#other"}


def test_a_bound_with_no_room_is_an_option_error(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="a label needs room for one value"):
        commands.follow(str(tmp_path / "server.log"), metrics_port=0, metrics_label_values=0, stop=threading.Event())
