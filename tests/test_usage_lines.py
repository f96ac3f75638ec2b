"""The wordings that state the KV cache beside the allocation lines (issue 32, item 4).

The block counts of other platforms and the V1 logger's ``cache_config_info`` are capacities, read by
default; the periodic usage lines of both servers become ``kv_pool.usage`` only with ``usage``
(``kvlog migrate --usage``), and pass byte-identical without it. The lines are real ones, pasted by
users into public threads (the source above each), or printed by the releases' code as quoted.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import kvlog_text

from kvlog.migration import load_chain
from kvlog.migration.candidates import might_be_read
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.migration.errors import PlanError
from kvlog.migration.sampling import EVERY

CHAIN = load_chain()


def migrate(text: str, **options: Any) -> tuple[bytes, list[dict[str, Any]], list[dict[str, Any]]]:
    """The output, its events and the dead letters of ``text`` migrated with ``options``."""
    out, dead = io.BytesIO(), []
    Migrator(CHAIN, MigrateOptions(**options)).migrate("usage.log", io.BytesIO(text.encode()), out, dead.append)
    events = [orjson.loads(line) for line in out.getvalue().splitlines() if line.startswith(b'{"event"')]
    return out.getvalue(), events, dead


#: (line, the fields its event says); each line as pasted
USAGE_LINES = [
    # vllm-project/vllm#3094 (0.3.x, V0)
    (
        "INFO 02-28 21:48:18 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 44.9 "
        "tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 82.1%, CPU KV cache "
        "usage: 0.0%",
        {"fraction": 0.821, "host_fraction": 0.0, "device": "GPU", "engine": None, "used_tokens": None},
    ),
    # vllm-project/vllm#6206 (0.5.x, behind docker's timestamp; the V0 line's final full stop)
    (
        "INFO 07-08 07:17:34 metrics.py:334] Avg prompt throughput: 6501.4 tokens/s, Avg generation throughput: "
        "69.1 tokens/s, Running: 4 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 15.6%, CPU KV cache "
        "usage: 0.0%.",
        {"fraction": 0.156, "host_fraction": 0.0, "device": "GPU"},
    ),
    # vLLM 0.7.1's V1 line (vllm/v1/metrics/loggers.py): no comma before the usage
    (
        "INFO 02-01 10:00:00 loggers.py:72] Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 3.1 "
        "tokens/s, Running: 1 reqs, Waiting: 0 reqs GPU KV cache usage: 0.4%.",
        {"fraction": 0.004, "host_fraction": None, "device": "GPU"},
    ),
    # vLLM 0.10's V1 line, from an engine core (vllm/v1/metrics/loggers.py)
    (
        "(APIServer pid=1) INFO 09-03 00:41:13 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
        "generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix "
        "cache hit rate: 0.0%",
        {"fraction": 0.0, "engine": 0, "device": "GPU"},
    ),
    # vLLM 0.34's (the device named, preemptions, an external hit rate)
    (
        "INFO 11-20 08:00:00 [loggers.py:336] Engine 001: Avg prompt throughput: 812.3 tokens/s, Avg generation "
        "throughput: 95.0 tokens/s, Running: 12 reqs, Waiting: 3 reqs, Preemptions: 2, XPU KV cache usage: 97.5%, "
        "Prefix cache hit rate: 41.2%, External prefix cache hit rate: 0.0%",
        {"fraction": 0.975, "engine": 1, "device": "XPU"},
    ),
    # vLLM 0.30's per-iteration details line
    (
        "INFO 09-01 08:00:00 [loggers.py:210] Engine 000: Iteration(42): 1 context requests, 512 context tokens, 3 "
        "generation requests, 3 generation tokens, iteration elapsed time: 21.30 ms, GPU KV cache usage: 7.5%",
        {"fraction": 0.075, "engine": 0, "device": "GPU"},
    ),
    # sgl-project/sglang#3909 (0.4.x)
    (
        "[2025-02-27 04:46:39 TP0] Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, gen throughput "
        "(token/s): 186.64, #queue-req: 0",
        {"fraction": 0.12, "used_tokens": 62531, "swa_fraction": None},
    ),
    # sgl-project/sglang#10053 (0.5.x: the line ends in ", ")
    (
        "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, cuda graph: True, "
        "gen throughput (token/s): 1.06, #queue-req: 0, ",
        {"fraction": 0.0, "used_tokens": 137},
    ),
    (
        "[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, ",
        {"fraction": 0.0, "used_tokens": None},
    ),
    # sgl-project/sglang#22166 (2026: no rank tag, `Decode batch,`)
    (
        "[2026-04-05 20:02:51] Prefill batch, #new-seq: 1, #new-token: 158, #cached-token: 0, token usage: 0.08, "
        "#running-req: 31, #queue-req: 0, cuda graph: True, input throughput (token/s): 559.53",
        {"fraction": 0.08},
    ),
    # sgl-project/sglang#938 (0.2.x, pasted without its prefix)
    (
        "Decode batch. #running-req: 1010, #token: 55006, token usage: 0.93, gen throughput (token/s): 1397.13, "
        "#queue-req: 12279",
        {"fraction": 0.93, "used_tokens": 55006},
    ),
    # sglang 0.1.x (sglang/srt/managers/router/model_rpc.py)
    (
        "#running-req: 3, #token: 1204, token usage: 0.01, gen throughput (token/s): 88.20, #queue-req: 0",
        {"fraction": 0.01, "used_tokens": 1204},
    ),
    # a hybrid model's two pools (sglang 0.5.23's pool_stats_observer.py), speculative decoding's accept len
    (
        "[2026-10-30 09:00:00 TP0] Decode batch, #running-req: 64, #full token: 190211, full token usage: 0.18, "
        "#swa token: 20480, swa token usage: 0.31, accept len: 2.81, cuda graph: True, gen throughput (token/s): "
        "3120.55, #queue-req: 0, ",
        {"fraction": 0.18, "used_tokens": 190211, "swa_fraction": 0.31, "swa_used_tokens": 20480},
    ),
    (
        "[2026-10-30 09:00:01 TP0] Prefill batch, #new-seq: 2, #new-token: 3072, #cached-token: 1024, full token "
        "usage: 0.20, swa token usage: 0.05, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
        "input throughput (token/s): 0.00",
        {"fraction": 0.2, "swa_fraction": 0.05},
    ),
]


@pytest.mark.parametrize(("line", "expected"), USAGE_LINES, ids=[str(n) for n in range(len(USAGE_LINES))])
def test_a_usage_line_becomes_a_usage_event_when_asked(line: str, expected: dict[str, Any]) -> None:
    _, events, dead = migrate(line + "\n", usage="all")
    assert dead == []
    (event,) = events
    assert event["event"] == "kv_pool.usage"
    assert {name: event[name] for name in expected} == expected


def test_usage_lines_pass_byte_identical_by_default() -> None:
    text = "".join(line + "\n" for line, _ in USAGE_LINES)
    out, events, dead = migrate(text)
    assert (out, events, dead) == (text.encode(), [], [])


def test_sampled_keeps_the_first_each_move_of_a_step_and_one_in_every() -> None:
    """One rank's flat stretch keeps one line in ``EVERY``; a move of 0.05 is kept at once; ranks apart."""
    line = "[2025-02-27 04:46:{s:02d} TP{tp}] Decode batch. #running-req: 8, #token: 6, token usage: {u:.2f}, "
    line += "#queue-req: 0\n"
    usages = [0.10] * (EVERY + 5) + [0.12, 0.15, 0.16, 0.40]
    text = "".join(line.format(s=n % 60, tp=0, u=u) for n, u in enumerate(usages))
    text += line.format(s=0, tp=1, u=0.10)
    out, events, _ = migrate(text, usage="sampled")
    kept = [(e["ranks"]["tp"], e["fraction"], e["migrated"]["line"]) for e in events]
    assert kept == [
        (0, 0.10, 1),
        (0, 0.10, EVERY + 1),
        (0, 0.15, EVERY + 7),
        (0, 0.40, EVERY + 9),
        (1, 0.10, EVERY + 10),
    ]
    # the lines not kept are there as they were, in order
    lines = out.splitlines(keepends=True)
    assert len(lines) == len(usages) + 1
    assert lines[1] == text.splitlines(keepends=True)[1].encode()


def test_an_unknown_usage_mode_is_refused() -> None:
    with pytest.raises(PlanError):
        MigrateOptions(usage="some")  # type: ignore[arg-type]


#: (line, the capacity it says); each read by default
CAPACITY_LINES = [
    # vLLM 0.7.3 to 0.11 on CUDA: the platform's device name (vllm/executor/executor_base.py)
    (
        "INFO 03-05 10:00:05 [executor_base.py:111] # cuda blocks: 30138, # CPU blocks: 2048",
        {"device": "cuda", "num_gpu_blocks": 30138, "num_cpu_blocks": 2048},
    ),
    # 0.7.0 to 0.7.2 (the dispatch key), vllm-ascend's platform, TPU and HPU executors
    (
        "INFO 01-28 10:00:05 executor_base.py:111] # CUDA blocks: 27357, # CPU blocks: 4096",
        {"device": "CUDA", "num_gpu_blocks": 27357},
    ),
    ("INFO 04-01 10:00:05 executor_base.py:115] # npu blocks: 8714, # CPU blocks: 1638", {"device": "npu"}),
    ("INFO 08-01 10:00:05 tpu_executor.py:74] # TPU blocks: 12108, # CPU blocks: 1489", {"device": "TPU"}),
    ("INFO 11-20 10:00:05 hpu_executor.py:90] # HPU blocks: 1600, # CPU blocks: 128", {"device": "HPU"}),
    # the CPU backend prints its device blocks under the CPU's name
    ("INFO 06-01 10:00:05 cpu_executor.py:117] # CPU blocks: 7281", {"device": "CPU", "num_gpu_blocks": 7281}),
    # the V1 logger, 0.9 on (vllm/v1/metrics/loggers.py)
    (
        "INFO 06-10 10:00:05 [loggers.py:137] Engine 000: vllm cache_config_info with initialization after "
        "num_gpu_blocks is: 41652",
        {"num_gpu_blocks": 41652, "device": None},
    ),
    (
        "INFO 10-10 10:00:05 [loggers.py:427] 2 Engines: vllm cache_config_info with initialization after "
        "num_gpu_blocks is: 20480",
        {"num_gpu_blocks": 20480},
    ),
    # the metrics endpoint's info gauge, pasted with the logs
    (
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",'
        'cpu_offload_gb="0",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",'
        'num_cpu_blocks="None",num_gpu_blocks="29545",sliding_window="None",swap_space="4"} 1.0',
        {"num_gpu_blocks": 29545, "num_cpu_blocks": None},
    ),
]


@pytest.mark.parametrize(("line", "expected"), CAPACITY_LINES, ids=[str(n) for n in range(len(CAPACITY_LINES))])
def test_a_capacity_wording_becomes_the_capacity_event(line: str, expected: dict[str, Any]) -> None:
    _, events, dead = migrate(line + "\n")
    assert dead == []
    (event,) = events
    assert event["event"] == "kv_pool.capacity"
    assert {name: event[name] for name in expected} == expected


def test_the_live_probe_lets_usage_messages_through_only_when_asked() -> None:
    """``kvlog integrate``'s handler asks ``might_be_read`` of every record: a usage message is one with ``usage``."""
    prefixless = [line.split("] ", 1)[-1] for line, _ in USAGE_LINES]
    assert all(might_be_read(message, usage=True) for message in prefixless)
    assert not might_be_read("Decode batch. #running-req: 12, #token: 3456, token usage: 0.05, #queue-req: 0")


def test_migrate_usage_on_the_command_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(line + "\n" for line, _ in USAGE_LINES[6:8]))
    done = kvlog_text("migrate", log, "--usage", "all", "--only-events", "-o", "-")
    assert done.returncode == 0, done.stderr
    assert [orjson.loads(line)["event"] for line in done.stdout.splitlines()] == ["kv_pool.usage"] * 2
    assert kvlog_text("migrate", log, "-o", "-").stdout == log.read_text()  # the default: as they were
    refused = kvlog_text("migrate", log, "--usage", "some", "-o", "-")
    assert refused.returncode == 2 and "--usage" in refused.stderr and "Traceback" not in refused.stderr
