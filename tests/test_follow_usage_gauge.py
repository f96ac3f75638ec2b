"""``kvlog follow --usage``: the KV pool's occupancy as a gauge at ``--metrics-port``, in-process.

The real follower and the real endpoint: the exposition is what Prometheus scrapes. Without
``--usage`` the usage lines stay request lines, and no series of theirs appears.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from follow_helpers import append, following, wait_for

DECODE = (
    "[2025-02-27 04:46:{s} TP{tp}] Decode batch. #running-req: 8, #token: {tokens}, token usage: {usage}, "
    "gen throughput (token/s): 186.64, #queue-req: 0\n"
)
HYBRID = (
    "[2026-10-30 09:00:00 TP0] Decode batch, #running-req: 64, #full token: 190211, full token usage: 0.18, "
    "#swa token: 20480, swa token usage: 0.31, cuda graph: True, gen throughput (token/s): 3120.55, #queue-req: 0, \n"
)
VLLM = (
    "INFO 02-28 21:48:18 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 44.9 "
    "tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 82.1%, CPU KV cache usage: 0.0%\n"
)


def exposition(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def usage_series(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith(("kvlog_kv_pool_usage", "kvlog_kv_pool_used")))


def test_follow_serves_the_usage_of_each_rank_as_it_moves(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        DECODE.format(s=39, tp=0, tokens=62531, usage="0.12") + DECODE.format(s=40, tp=1, tokens=7, usage="0.00")
    )
    with following(str(log), tmp_path / "events.jsonl", metrics_port=0, usage="all", hold_s=0.2) as running:
        wait_for(lambda: any("serving metrics at" in notice for notice in running.notices))
        url = next(n for n in running.notices if "serving metrics at" in n).split("serving metrics at ")[1]
        first = f'kvlog_kv_pool_usage_ratio{{pool="full",server="sglang",server_instance="{log}",tp="0"}} 0.12'
        wait_for(lambda: first in exposition(url), what="the first usage served")
        append(log, DECODE.format(s=41, tp=0, tokens=90000, usage="0.17"))
        moved = f'kvlog_kv_pool_usage_ratio{{pool="full",server="sglang",server_instance="{log}",tp="0"}} 0.17'
        wait_for(lambda: moved in exposition(url), what="the usage moved")
        text = exposition(url)
    assert usage_series(text) == [
        f'kvlog_kv_pool_usage_ratio{{pool="full",server="sglang",server_instance="{log}",tp="0"}} 0.17',
        f'kvlog_kv_pool_usage_ratio{{pool="full",server="sglang",server_instance="{log}",tp="1"}} 0.0',
        f'kvlog_kv_pool_used_tokens{{pool="full",server="sglang",server_instance="{log}",tp="0"}} 90000.0',
        f'kvlog_kv_pool_used_tokens{{pool="full",server="sglang",server_instance="{log}",tp="1"}} 7.0',
    ]


def test_each_pool_and_device_has_its_series(tmp_path: Path) -> None:
    sglang, vllm = tmp_path / "sglang.log", tmp_path / "vllm.log"
    sglang.write_text(HYBRID)
    vllm.write_text(VLLM)
    with following([str(sglang), str(vllm)], tmp_path / "events.jsonl", metrics_port=0, usage="sampled") as running:
        wait_for(lambda: any("serving metrics at" in notice for notice in running.notices))
        url = next(n for n in running.notices if "serving metrics at" in n).split("serving metrics at ")[1]
        wait_for(lambda: len(usage_series(exposition(url))) == 6, what="both logs' usage served")
        text = exposition(url)
    assert usage_series(text) == [
        f'kvlog_kv_pool_usage_ratio{{device="GPU",pool="full",server="vllm",server_instance="{vllm}"}} 0.821',
        f'kvlog_kv_pool_usage_ratio{{device="GPU",pool="host",server="vllm",server_instance="{vllm}"}} 0.0',
        f'kvlog_kv_pool_usage_ratio{{pool="full",server="sglang",server_instance="{sglang}",tp="0"}} 0.18',
        f'kvlog_kv_pool_usage_ratio{{pool="swa",server="sglang",server_instance="{sglang}",tp="0"}} 0.31',
        f'kvlog_kv_pool_used_tokens{{pool="full",server="sglang",server_instance="{sglang}",tp="0"}} 190211.0',
        f'kvlog_kv_pool_used_tokens{{pool="swa",server="sglang",server_instance="{sglang}",tp="0"}} 20480.0',
    ]


def test_without_usage_the_usage_lines_make_no_series(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2025-02-27 04:46:00 TP0] Load weight begin. avail mem=70.00 GB\n" + HYBRID)
    with following(str(log), tmp_path / "events.jsonl", metrics_port=0) as running:
        wait_for(lambda: any("serving metrics at" in notice for notice in running.notices))
        url = next(n for n in running.notices if "serving metrics at" in n).split("serving metrics at ")[1]
        wait_for(lambda: "kvlog_memory_avail_bytes{" in exposition(url), what="the load line served")
        assert usage_series(exposition(url)) == []
