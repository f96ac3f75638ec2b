"""``kvlog ledger``: where the device memory went, per run and rank, each figure checked by hand against its line.

The real-thread cases are start-ups users pasted (the thread is named on each); their arithmetic is done
here from the printed figures, in the units the lines print (sglang's ``GB`` are GiB), so that the test
does not lean on the code it tests.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from cli_harness import kvlog, kvlog_text

from kvlog import commands
from kvlog.ledger import CONSUMERS
from kvlog.schema.readings import DEVICE_CONSUMERS, DEVICE_TOTAL, KV_SET_ASIDE, MEMORY_BUDGET

CORPUS = Path(__file__).resolve().parent / "corpus"
SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
GIB = 1 << 30
#: what a figure printed with two decimals of GiB hides: 0.005 GiB, rounded up as the migration records it
HALF = 5368710

#: sglang PR #18263 (2026-07-15, Qwen3-30B-A3B on MI300): load, pool and pool-end lines of one rank
SGLANG_18263 = "".join(
    (
        "[2026-07-15 13:14:53] Load weight end. elapsed=19.09 s, type=Qwen3MoeForCausalLM, avail mem=230.20 GB, mem usage=56.98 GB.\n",  # noqa: E501
        "[2026-07-15 13:14:54] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1669816, K size: 76.44 GB, V size: 76.44 GB\n",  # noqa: E501
        "[2026-07-15 13:14:54] Memory pool end. avail mem=74.01 GB\n",
    )
)
#: vLLM PR #14447 (2025-04-12, vLLM 0.8 on a 24 GiB card): the memory profile's budget and its parts
VLLM_14447 = "".join(
    (
        "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] Memory profiling takes 17.59 seconds\n",
        "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] the current vLLM instance can use total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB\n",  # noqa: E501
        "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory reserved for KV Cache is 1.57GiB.\n",  # noqa: E501
    )
)
#: vLLM PR #29335 (2025-11-24, a V1 engine): the load (``%.4f`` GiB) and the KV memory (``format_gib``)
VLLM_29335 = "".join(
    (
        "(EngineCore_DP0 pid=441) INFO 11-24 11:43:54 [gpu_model_runner.py:3341] Model loading took 2.0513 GiB memory and 27.200487 seconds\n",  # noqa: E501
        "(EngineCore_DP0 pid=441) INFO 11-24 11:44:16 [monitor.py:34] torch.compile takes 19.69 s in total\n",
        "(EngineCore_DP0 pid=441) INFO 11-24 11:44:17 [gpu_worker.py:348] Available KV cache memory: 33.31 GiB\n",
        "(EngineCore_DP0 pid=441) INFO 11-24 11:44:18 [kv_cache_utils.py:1234] GPU KV cache size: 1,587,648 tokens\n",
    )
)
#: sglang PR #11716 (2025-10-16, TP8): four ranks' pools and pool ends, alike
SGLANG_11716 = "".join(
    (
        "[2025-10-16 09:06:22 TP5] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB\n",
        "[2025-10-16 09:06:22 TP1] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB\n",
        "[2025-10-16 09:06:22 TP3] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB\n",
        "[2025-10-16 09:06:22 TP5] Memory pool end. avail mem=11.87 GB\n",
        "[2025-10-16 09:06:22 TP6] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB\n",
        "[2025-10-16 09:06:22 TP1] Memory pool end. avail mem=11.87 GB\n",
        "[2025-10-16 09:06:22 TP3] Memory pool end. avail mem=11.87 GB\n",
        "[2025-10-16 09:06:22 TP6] Memory pool end. avail mem=11.87 GB\n",
    )
)
#: sglang PR #16065 (2025-12-29, LFM2-700M, sglang 0.5.6.post2, one GPU): every start-up step of one rank,
#: torch distributed, the load, the Mamba state and KV pools, the CUDA-graph capture and its progress bar
SGLANG_16065 = "".join(
    (
        "[2025-12-29 18:33:02 TP0] Init torch distributed ends. mem usage=0.00 GB\n",
        "[2025-12-29 18:33:03 TP0] Load weight begin. avail mem=15.33 GB\n",
        "[2025-12-29 18:33:03 TP0] Load weight end. type=Lfm2ForCausalLM, dtype=torch.bfloat16, avail mem=13.81 GB, mem usage=1.52 GB.\n",  # noqa: E501
        "[2025-12-29 18:33:03 TP0] Mamba Cache is allocated. max_mamba_cache_size: 85292, conv_state size: 4.88GB, ssm_state size: 0.00GB \n",  # noqa: E501
        "[2025-12-29 18:33:03 TP0] KV Cache is allocated. #tokens: 473854, K size: 2.71 GB, V size: 2.71 GB\n",
        "[2025-12-29 18:33:03 TP0] Memory pool end. avail mem=2.43 GB\n",
        "[2025-12-29 18:33:03 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=2.42 GB\n",
        "Capturing batches (bs=1 avail_mem=2.39 GB): 100%|\u2588| 4/4 [00:00<00:00,  7.80it/\n",
        "[2025-12-29 18:33:04 TP0] Capture cuda graph end. Time elapsed: 1.01 s. mem usage=0.03 GB. avail mem=2.39 GB.\n",  # noqa: E501
        "max_total_num_tokens=473854\n",
    )
)


def gib(printed: float) -> int:
    return round(printed * GIB)


def ledger(*paths: Path, **options: Any) -> tuple[int, Any]:
    out = io.BytesIO()
    fmt = options.pop("output_format", "json")
    outcome = commands.ledger([str(path) for path in paths], output_format=fmt, stdout=out, **options)
    text = out.getvalue().decode()
    return outcome.exit_status, json.loads(text) if fmt == "json" else text


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def current(name: str, **fields: Any) -> str:
    """A kvlog event at its newest version, every required field it is not given set to null."""
    version = max(int(path.stem[1:]) for path in (SCHEMAS / name).glob("v*.json"))
    schema = json.loads((SCHEMAS / name / f"v{version}.json").read_text())
    event: dict[str, Any] = {"event": name, "schema_version": version, "level": "info", "pid": 7}
    event |= {"timestamp": "2026-07-21T09:00:00Z", "ranks": {"tp": 0}}
    event |= {field: None for field in schema.get("required", []) if field not in event}
    return json.dumps(event | fields)


def own_events(tmp_path: Path, *lines: str, name: str = "events.jsonl") -> Path:
    return write(tmp_path, name, "".join(line + "\n" for line in lines))


def test_an_sglang_start_up_from_a_thread_is_read_figure_by_figure(tmp_path: Path) -> None:
    path = write(tmp_path, "sglang.log", SGLANG_18263)
    status, table = ledger(path)
    assert status == 0
    [row] = table["rows"]
    assert row["consumers"]["weights_bytes"] == gib(56.98)
    assert row["kv_committed_bytes"] == 2 * gib(76.44)
    assert row["free_bytes"] == gib(74.01)
    uncertainty = row["uncertainty_bytes"]
    assert uncertainty["weights_bytes"] == HALF
    assert uncertainty["kv_committed_bytes"] == 2 * HALF
    assert uncertainty["free_bytes"] == HALF
    assert row["evidence"]["weights_bytes"] == [f"{path}:1"]
    assert row["evidence"]["kv_committed_bytes"] == [f"{path}:2"]
    assert row["evidence"]["free_bytes"] == [f"{path}:3"]
    # sglang prints no device total: the unaccounted memory is unknown, never worked out from a guess
    assert row["device_total_bytes"] is None
    assert row["unaccounted_bytes"] is None
    assert row["flags"] == []


def test_an_sglang_start_up_with_every_step_from_a_thread_reads_each_step_s_own_cost(tmp_path: Path) -> None:
    """Issue 33: torch distributed, the weights, the graphs and the Mamba state each from its own line.

    sglang's ``mem usage`` is free memory before the step minus free memory after it, so the steps check
    against each other by hand: 15.33 - 1.52 = 13.81 (the load's own ``avail mem``), 2.42 - 2.39 = 0.03
    (the capture's), each within the 0.01 GiB two printed figures hide.
    """
    path = write(tmp_path, "sglang.log", SGLANG_16065)
    status, table = ledger(path)
    assert status == 0
    [row] = table["rows"]
    consumers, uncertainty, evidence = row["consumers"], row["uncertainty_bytes"], row["evidence"]
    # the run starts at torch distributed's line, before the load: its cost is the run's
    assert (consumers["runtime_bytes"], uncertainty["runtime_bytes"]) == (0, HALF)  # stated 0.00, never null
    assert evidence["runtime_bytes"] == [f"{path}:1"]
    assert consumers["weights_bytes"] == gib(1.52)
    assert abs(gib(15.33) - gib(1.52) - gib(13.81)) <= 2 * HALF
    assert consumers["mamba_pool_bytes"] == gib(4.88) + gib(0.00)
    assert uncertainty["mamba_pool_bytes"] == 2 * HALF
    assert (consumers["cuda_graph_bytes"], evidence["cuda_graph_bytes"]) == (gib(0.03), [f"{path}:9"])
    assert abs(gib(2.42) - gib(2.39) - gib(0.03)) <= 2 * HALF
    assert row["kv_committed_bytes"] == 2 * gib(2.71)
    # the end of start-up is the capture's line (the bar and bench_one_batch's bare limits say no free memory)
    assert (row["free_bytes"], evidence["free_bytes"]) == (gib(2.39), [f"{path}:9"])
    stated = sum(v for v in consumers.values() if v is not None) + row["kv_committed_bytes"] + row["free_bytes"]
    # 1.09 GiB of what was free before the load no line states (between the load and the pool's end)
    assert gib(15.33) - stated == gib(15.33) - gib(1.52) - gib(4.88) - 2 * gib(2.71) - gib(0.03) - gib(2.39)
    assert abs((gib(15.33) - stated) - gib(1.09)) <= 7 * HALF
    assert row["device_total_bytes"] is None and row["unaccounted_bytes"] is None
    assert row["flags"] == []


def test_each_cuda_graph_capture_of_a_rank_adds_to_its_graphs(tmp_path: Path) -> None:
    """sglang prints one line per capture (the target's, the draft's): each is a pool of graphs of its own."""
    path = write(
        tmp_path,
        "sglang.log",
        "[2025-09-05 20:47:00 TP0] Load weight begin. avail mem=60.00 GB\n"
        "[2025-09-05 20:48:29 TP0] Capture cuda graph end. Time elapsed: 12.11 s. mem usage=0.54 GB. "
        "avail mem=16.74 GB.\n"
        "[2025-09-05 20:50:29 TP0] Capture draft cuda graph end. Time elapsed: 62.67 s. mem usage=0.21 GB. "
        "avail mem=15.31 GB.\n",
    )
    _, table = ledger(path)
    [row] = table["rows"]
    assert row["consumers"]["cuda_graph_bytes"] == gib(0.54) + gib(0.21)
    assert row["uncertainty_bytes"]["cuda_graph_bytes"] == 2 * HALF
    assert row["evidence"]["cuda_graph_bytes"] == [f"{path}:2", f"{path}:3"]
    assert row["free_bytes"] == gib(15.31)


def test_auxiliary_buffers_add_up_by_kind_and_a_graph_pool_is_left_to_its_capture(tmp_path: Path) -> None:
    """A staging buffer and the Mamba checkpoint pool are buffers of their own; a pre-carved graph pool is
    allocated within the capture, whose ``mem usage`` already holds it, so it is not counted twice."""
    path = write(
        tmp_path,
        "sglang.log",
        "[2026-09-02 10:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"
        "[2026-09-02 10:00:01 TP0] StagingBuffer allocated: 256.0 MB on cuda:0, method=cudaMalloc, ptr=0x7f00\n"
        "[2026-09-02 10:00:02 TP0] int8 mamba checkpoint pool: 128 slots, 3.25GB (qdata 2.80 + scale 0.05 + "
        "conv 0.40); active mamba pool 256 slots\n"
        "[2026-09-02 10:00:03 TP0] Graph pool pre-carved: 1.50 GB\n"
        "[2026-09-02 10:00:04 TP0] Capture cuda graph end. Time elapsed: 9.00 s. mem usage=1.62 GB. "
        "avail mem=20.00 GB.\n",
    )
    _, table = ledger(path)
    [row] = table["rows"]
    assert row["consumers"]["aux_buffers_bytes"] == 256 * (1 << 20) + gib(3.25)
    assert row["uncertainty_bytes"]["aux_buffers_bytes"] == 52429 + HALF  # 0.05 MiB rounded up, 0.005 GiB
    assert row["evidence"]["aux_buffers_bytes"] == [f"{path}:2", f"{path}:3"]
    assert row["consumers"]["cuda_graph_bytes"] == gib(1.62)


def test_buffers_of_v2s_kinds_add_up_and_a_workspace_captured_with_a_graph_is_left_to_it(tmp_path: Path) -> None:
    """A state capturer's device buffer (the line of sglang issue #26860), the symmetric-memory pool and a
    tokenizer worker's multimodal pool are buffers of their own; FlashInfer's full-CUDA-graph prefill workspace
    is allocated while the prefill graph is captured, inside the capture's ``mem usage``."""
    path = write(
        tmp_path,
        "sglang.log",
        "[2026-06-01 10:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"
        "[2026-06-01 10:00:01 TP0] DeviceCache[routed_experts] allocated: shape=(2048, 48, 8), size=3.00 MB\n"
        "[2026-06-01 10:00:02 TP0] Full-CG prefill workspace: 384 MB (max bucket 8192 tokens, 16 request slots)\n"
        "[2026-06-01 10:00:03 TP0] Capture cuda graph end. Time elapsed: 9.00 s. mem usage=1.62 GB. "
        "avail mem=20.00 GB.\n"
        "[2026-06-01 10:00:04 TP0] Pre-allocating symmetric memory pool with 4 GiB\n",
    )
    _, table = ledger(path)
    [row] = table["rows"]
    assert row["consumers"]["aux_buffers_bytes"] == 3 * (1 << 20) + 4 * (1 << 30)
    # 0.005 MiB rounded up; a whole GiB as printed, half a GiB (the setting is an integer, the line does not say so)
    assert row["uncertainty_bytes"]["aux_buffers_bytes"] == 5243 + (1 << 29)
    assert row["evidence"]["aux_buffers_bytes"] == [f"{path}:2", f"{path}:5"]
    assert row["consumers"]["cuda_graph_bytes"] == gib(1.62)


def test_eplbs_warmup_is_runtime_and_each_row_bucket_graph_adds_to_the_graphs(tmp_path: Path) -> None:
    """EPLB's P2P warmup measures the NCCL transports it leaves (free before minus after): runtime. A row-bucket
    graph line states its own capture and the running total: the graph's own figure adds, the total does not."""
    path = write(
        tmp_path,
        "sglang.log",
        "[2026-12-01 10:00:00 TP0] EPLB default-group P2P warmup completed in 1.234s (world_size=8, "
        "free memory delta=612.00 MiB)\n"
        "[2026-12-01 10:00:01 TP0] Load weight begin. avail mem=70.00 GB\n"
        "[2026-12-01 10:00:02 TP0] Capture cuda graph end. Time elapsed: 9.00 s. mem usage=1.62 GB. "
        "avail mem=20.00 GB.\n"
        "[2026-12-01 10:00:03 TP0] DecoderReplayTail: captured 256 rows (3 segments) in 0.42 s, 0.125 GiB; "
        "1 graphs, 0.42 s, 0.125 GiB\n"
        "[2026-12-01 10:00:04 TP0] DecoderReplayTail: captured 512 rows (3 segments) in 0.40 s, 0.250 GiB; "
        "2 graphs, 0.82 s, 0.375 GiB\n",
    )
    _, table = ledger(path)
    [row] = table["rows"]
    assert row["consumers"]["runtime_bytes"] == 612 * (1 << 20)
    assert row["evidence"]["runtime_bytes"] == [f"{path}:1"]
    assert row["consumers"]["cuda_graph_bytes"] == gib(1.62) + (1 << 27) + (1 << 28)
    assert row["uncertainty_bytes"]["cuda_graph_bytes"] == HALF + 2 * 536871  # 0.005 GiB, 0.0005 GiB twice
    assert row["evidence"]["cuda_graph_bytes"] == [f"{path}:3", f"{path}:4", f"{path}:5"]


def test_a_vllm_memory_profile_from_a_thread_adds_up_to_its_budget(tmp_path: Path) -> None:
    status, table = ledger(write(tmp_path, "vllm.log", VLLM_14447))
    assert status == 0
    [row] = table["rows"]
    assert row["device_total_bytes"] == gib(23.58)
    assert row["budget_bytes"] == gib(23.35)
    consumers = row["consumers"]
    assert consumers["weights_bytes"] == gib(21.21)
    assert consumers["non_torch_bytes"] == gib(0.20)
    assert consumers["activation_peak_bytes"] == gib(0.37)
    assert row["kv_committed_bytes"] == gib(1.57)  # the memory set aside for the KV cache, allocated at once
    # by hand: 21.21 + 0.20 + 0.37 + 1.57 = 23.35 GiB, the budget, within the five figures' rounding
    parts = [consumers["weights_bytes"], consumers["non_torch_bytes"], consumers["activation_peak_bytes"]]
    assert abs(sum(parts) + row["kv_committed_bytes"] - row["budget_bytes"]) <= 5 * HALF
    # no CUDA-graph line: nothing was captured beyond the budget; no free memory: unaccounted unknown
    assert consumers["cuda_graph_bytes"] is None
    assert row["free_bytes"] is None
    assert row["unaccounted_bytes"] is None
    assert row["flags"] == []


def test_a_vllm_v1_start_up_from_a_thread_carries_each_wording_s_own_rounding(tmp_path: Path) -> None:
    path = write(tmp_path, "vllm-v1.log", VLLM_29335)
    _, table = ledger(path)
    [row] = table["rows"]
    assert row["consumers"]["weights_bytes"] == gib(2.0513)
    assert row["uncertainty_bytes"]["weights_bytes"] == 53688  # four decimals: 0.00005 GiB, rounded up
    assert row["kv_committed_bytes"] == gib(33.31)  # set aside for the KV cache, which V1 allocates at once
    assert row["uncertainty_bytes"]["kv_committed_bytes"] == HALF
    assert row["evidence"] == {"weights_bytes": [f"{path}:1"], "kv_committed_bytes": [f"{path}:3"]}


def test_a_consumer_no_line_states_is_null_in_json_empty_in_csv_and_unknown_in_text(tmp_path: Path) -> None:
    path = write(tmp_path, "sglang.log", SGLANG_18263)
    _, table = ledger(path)
    [row] = table["rows"]
    assert set(row["consumers"]) == {f"{name}_bytes" for name in CONSUMERS}
    for name in ("non_torch_bytes", "activation_peak_bytes", "cuda_graph_bytes", "mamba_pool_bytes"):
        assert row["consumers"][name] is None
        assert name not in row["evidence"]
    _, text = ledger(path, output_format="csv")
    [record] = list(csv.DictReader(io.StringIO(text)))
    assert record["cuda_graph_bytes"] == "" and record["weights_bytes"] == str(gib(56.98))
    _, text = ledger(path, output_format="text")
    assert [line.split() for line in text.splitlines() if line.strip().startswith("cuda graph")] == [
        ["cuda", "graph", "unknown"]
    ]


def test_unaccounted_is_the_total_less_consumers_kv_and_free_and_is_flagged_beyond_the_threshold(
    tmp_path: Path,
) -> None:
    path = own_events(
        tmp_path,
        current("weights.load_begin", avail_bytes=80 * GIB),
        current("memory.profile_budget", total_bytes=80 * GIB, gpu_memory_utilization=0.9, budget_bytes=72 * GIB),
        current("weights.load_end", mem_usage_bytes=15 * GIB),
        current("kv_pool.allocation", layout="mha", k_bytes=25 * GIB, v_bytes=25 * GIB, allocation_state="allocated"),
        current("kv_memory.pool_end", avail_bytes=10 * GIB),
    )
    status, table = ledger(path)
    assert status == 0
    [row] = table["rows"]
    assert row["unaccounted_bytes"] == (80 - 15 - 50 - 10) * GIB
    assert row["uncertainty_bytes"]["unaccounted_bytes"] == 0  # kvlog's own events state exact bytes
    assert [flag.split(":")[0] for flag in row["flags"]] == ["unaccounted"]
    _, table = ledger(path, unaccounted_threshold=6 * GIB)
    assert table["rows"][0]["flags"] == []
    done = kvlog("ledger", path, "--format", "json", "--unaccounted-threshold", "4.5")  # GiB on the command line
    assert json.loads(done.stdout)["unaccounted_threshold_bytes"] == 4.5 * GIB
    assert json.loads(done.stdout)["rows"][0]["flags"] != [] and b"1 run(s) and rank(s) flagged" in done.stderr


def test_the_driver_s_word_gives_an_sglang_rank_its_total_and_its_unaccounted_memory(tmp_path: Path) -> None:
    """sglang states no device total; ``kvlog integrate --nvml`` measures one beside each record."""

    def measured(line: int, free: int) -> str:
        return current(
            "device_memory.measured",
            source="nvml",
            measured_event="kv_memory.pool_end",
            measured_line=line,
            gpu=0,
            device_total_bytes=80 * GIB,
            device_free_bytes=free,
            device_used_bytes=80 * GIB - free,
            lag_us=120.0,
        )

    stated = [
        current("weights.load_begin", avail_bytes=79 * GIB),
        current("weights.load_end", mem_usage_bytes=15 * GIB),
        current("kv_pool.allocation", layout="mha", k_bytes=25 * GIB, v_bytes=25 * GIB, allocation_state="allocated"),
        current("kv_memory.pool_end", avail_bytes=12 * GIB),
    ]
    _, table = ledger(own_events(tmp_path, *stated))
    assert (table["rows"][0]["device_total_bytes"], table["rows"][0]["unaccounted_bytes"]) == (None, None)
    path = own_events(tmp_path, *stated, measured(4, free=int(11.5 * GIB)))
    _, table = ledger(path)
    [row] = table["rows"]
    # the measured total, and the measured free memory (the driver's, after the line that stated 12 GiB)
    assert (row["device_total_bytes"], row["free_bytes"]) == (80 * GIB, int(11.5 * GIB))
    assert row["unaccounted_bytes"] == 80 * GIB - 15 * GIB - 50 * GIB - int(11.5 * GIB)
    assert row["evidence"]["device_total_bytes"] == ["(events of process 7):device_memory.measured"]


def test_unaccounted_at_the_threshold_is_not_flagged_a_byte_beyond_is(tmp_path: Path) -> None:
    for free, flags in ((78 * GIB, []), (78 * GIB - 1, ["unaccounted"])):
        path = own_events(
            tmp_path,
            current("memory.profile_budget", total_bytes=80 * GIB, gpu_memory_utilization=0.9, budget_bytes=72 * GIB),
            current("kv_memory.pool_end", avail_bytes=free),
        )
        _, table = ledger(path)
        assert [flag.split(":")[0] for flag in table["rows"][0]["flags"]] == flags


def test_a_budget_exceeded_after_cuda_graph_capture_is_flagged(tmp_path: Path) -> None:
    lines = [
        current("memory.profile_budget", total_bytes=80 * GIB, gpu_memory_utilization=0.9, budget_bytes=72 * GIB),
        current(
            "memory.profile_usage",
            weights_bytes=15 * GIB,
            non_torch_bytes=GIB,
            activation_peak_bytes=2 * GIB,
            kv_cache_bytes=54 * GIB,
        ),
    ]
    _, table = ledger(own_events(tmp_path, *lines))
    assert table["rows"][0]["flags"] == []  # 72 GiB of 72: within the budget
    _, table = ledger(own_events(tmp_path, *lines, current("cuda_graph.captured", mem_usage_bytes=GIB)))
    [row] = table["rows"]
    assert row["consumers"]["cuda_graph_bytes"] == GIB
    assert [flag.split(":")[0] for flag in row["flags"]] == ["budget_exceeded"]


def test_a_kv_upper_bound_larger_than_the_device_is_flagged_and_never_added_to_memory() -> None:
    """The golden pre-fix log's fourth run reserved 2 x 109.66 GiB of address space on a 139.06 GiB device."""
    _, table = ledger(CORPUS / "postcapture_before_fix_2026_07.log")
    flagged = [row for row in table["rows"] if any(flag.startswith("kv_va_above_device") for flag in row["flags"])]
    assert [row["evidence"]["kv_va_upper_bound_bytes"] for row in flagged] == [
        [f"{CORPUS / 'postcapture_before_fix_2026_07.log'}:31"]
    ]
    [row] = flagged
    assert row["kv_va_upper_bound_bytes"] == 2 * 117746528420
    # reserved, and the post-capture line sized the pool without printing its bytes: the KV memory is
    # unknown, neither the address space nor 0
    assert row["kv_committed_bytes"] is None


def test_ranks_of_one_run_that_differ_beyond_their_rounding_are_flagged(tmp_path: Path) -> None:
    _, table = ledger(write(tmp_path, "tp8.log", SGLANG_11716))
    assert len(table["rows"]) == 4
    assert all(row["flags"] == [] for row in table["rows"])  # alike: no flag
    differing = SGLANG_11716.replace(
        "[2025-10-16 09:06:22 TP6] Memory pool end. avail mem=11.87 GB",
        "[2025-10-16 09:06:22 TP6] Memory pool end. avail mem=11.85 GB",
    )
    _, table = ledger(write(tmp_path, "tp8.log", differing))
    flags = {row["ranks"]: row["flags"] for row in table["rows"]}
    # three ranks agree: only the one that holds less free memory is named, the rank to look at
    assert flags == {"TP1": [], "TP3": [], "TP5": [], "TP6": ["ranks_differ: free"]}
    two = "".join(line for line in differing.splitlines(keepends=True) if "TP5" in line or "TP6" in line)
    _, table = ledger(write(tmp_path, "tp2.log", two))
    # two ranks that differ: neither is the odd one out, both are named
    assert [row["flags"] for row in table["rows"]] == [["ranks_differ: free"]] * 2
    within = SGLANG_11716.replace(
        "[2025-10-16 09:06:22 TP6] Memory pool end. avail mem=11.87 GB",
        "[2025-10-16 09:06:22 TP6] Memory pool end. avail mem=11.86 GB",
    )
    _, table = ledger(write(tmp_path, "tp8.log", within))
    assert all(row["flags"] == [] for row in table["rows"])  # 0.01 GiB apart: within both roundings


@pytest.mark.parametrize("log", sorted(CORPUS.glob("*.log")), ids=lambda path: path.name)
def test_every_row_of_the_golden_logs_adds_up_within_its_uncertainty(log: Path) -> None:
    status, table = ledger(log)
    assert status in (0, 1)
    lines = log.read_bytes().splitlines()
    for row in table["rows"]:
        known = {name: value for name, value in row["consumers"].items() if value is not None}
        for name, figure in [*known.items(), ("kv_committed_bytes", row["kv_committed_bytes"])]:
            assert figure is None or figure >= 0, (name, row)
        for name, where in row["evidence"].items():  # each figure names lines of the log that print memory
            for at in where:
                file, _, line = at.rpartition(":")
                if file.startswith("(events of process"):  # a current kvlog event is kept as is: it has no line
                    assert line == row["evidence"][name][0].rpartition(":")[2] and "." in line
                    continue
                assert file == str(log) and line.isdigit() and int(line) <= len(lines), (name, at)
        if row["unaccounted_bytes"] is not None:
            parts = sum(known.values()) + (row["kv_committed_bytes"] or 0) + row["free_bytes"]
            assert row["unaccounted_bytes"] == row["device_total_bytes"] - parts
            rounding = row["uncertainty_bytes"]
            assert rounding["unaccounted_bytes"] == sum(
                v
                for k, v in rounding.items()
                if k != "unaccounted_bytes" and k in {*known, "device_total_bytes", "kv_committed_bytes", "free_bytes"}
            )


def test_the_weights_and_free_memory_are_summarize_s() -> None:
    """One reading of a run: the ledger's figures are those ``kvlog summarize`` shows for the same rows."""
    log = CORPUS / "gen1_early_2025.log"
    out = io.BytesIO()
    commands.summarize([str(log)], output_format="json", stdout=out)
    summary = json.loads(out.getvalue())["runs"]
    _, table = ledger(log)
    assert [(row["ranks"], row["run"]) for row in table["rows"]] == [(row["ranks"], row["run"]) for row in summary]
    assert [row["consumers"]["weights_bytes"] for row in table["rows"]] == [row["weights_bytes"] for row in summary]


def test_the_text_form_fits_100_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path, "a-server-log-with-a-name-long-enough-to-overflow-a-terminal-line-on-its-own.log", SGLANG_18263
    )
    _, text = ledger(path, output_format="text")
    assert max(map(len, text.splitlines())) <= 100
    assert "56.98 GiB" in text and "± 5.12 MiB" in text and "line 1" in text


def test_every_format_carries_the_same_figures(tmp_path: Path) -> None:
    path = write(tmp_path, "vllm.log", VLLM_14447)
    _, table = ledger(path)
    _, text = ledger(path, output_format="csv")
    [record] = list(csv.DictReader(io.StringIO(text)))
    [row] = table["rows"]
    assert int(record["device_total_bytes"]) == row["device_total_bytes"]
    assert int(record["weights_bytes"]) == row["consumers"]["weights_bytes"]
    assert int(record["weights_uncertainty_bytes"]) == row["uncertainty_bytes"]["weights_bytes"]
    assert record["weights_evidence"] == f"{path}:3"
    assert record["unaccounted_bytes"] == ""


def test_the_ledger_is_the_same_on_worker_processes() -> None:
    logs = [CORPUS / "gen1_early_2025.log", CORPUS / "postcapture_before_fix_2026_07.log"]
    assert ledger(*logs, output_format="csv") == ledger(*logs, output_format="csv", jobs=2)


def test_exit_statuses_are_summarize_s(tmp_path: Path) -> None:
    quiet = write(tmp_path, "quiet.log", "[2026-07-15 13:14:53] Server is ready.\n")
    result = kvlog("ledger", quiet, "--format", "json")
    assert result.returncode == 1  # no memory event: an empty ledger, as summarize writes an empty table
    assert json.loads(result.stdout)["rows"] == []
    result = kvlog("ledger", tmp_path / "missing.log")
    assert result.returncode == 2 and result.stdout == b""
    assert b"missing.log" in result.stderr
    readable = write(tmp_path, "sglang.log", SGLANG_18263)
    result = kvlog("ledger", tmp_path / "missing.log", readable, "--format", "json")
    assert result.returncode == 2  # the other inputs are still read
    assert [row["source"] for row in json.loads(result.stdout)["rows"]] == [str(readable)]
    result = kvlog("ledger", readable, "--unaccounted-threshold", "-1")
    assert result.returncode == 2 and b"Traceback" not in result.stderr


def test_the_cli_writes_the_ledger_to_a_file_and_says_what_it_flagged(tmp_path: Path) -> None:
    output = tmp_path / "ledger.csv"
    result = kvlog_text("ledger", CORPUS / "postcapture_before_fix_2026_07.log", "--format", "csv", "-o", output)
    assert result.returncode == 0 and result.stdout == ""
    assert "flagged" in result.stderr
    assert next(csv.DictReader(output.open()))["source"].endswith("postcapture_before_fix_2026_07.log")
    log = tmp_path / "sglang.log"
    log.write_text(SGLANG_18263)
    result = kvlog_text("ledger", log, "-o", log)
    assert result.returncode == 2 and log.read_text() == SGLANG_18263


def test_every_event_and_field_the_consumer_table_names_is_in_the_catalog() -> None:
    """A catalog change that renames a consumer's field must change the table too, or this fails."""
    named = [(reading.event, field) for reading in DEVICE_CONSUMERS for field in reading.fields]
    named += [*DEVICE_TOTAL.items(), *KV_SET_ASIDE.items(), *MEMORY_BUDGET.items()]
    for event, field in named:
        version = max(int(path.stem[1:]) for path in (SCHEMAS / event).glob("v*.json"))
        properties = json.loads((SCHEMAS / event / f"v{version}.json").read_text())["properties"]
        assert field in properties, (event, field)
    assert CONSUMERS == (
        "weights",
        "non_torch",
        "activation_peak",
        "runtime",
        "cuda_graph",
        "aux_buffers",
        "mamba_pool",
    )


def test_an_arena_s_commits_are_one_figure_resting_on_its_last_commit(tmp_path: Path) -> None:
    """Each commit states the arena's committed bytes so far: five commits are one figure, from the last line.

    Version-1 events are migrated, so each carries its line, as a live run's thousands of commits would.
    """
    commits = [
        json.dumps(
            {
                "event": "kv_arena.commit",
                "schema_version": 1,
                "timestamp": "2026-09-01T12:00:00Z",
                "level": "info",
                "pid": 7,
                "ranks": {"tp": 0},
                "arena_id": "7_0",
                "offset_bytes": index * GIB,
                "nbytes": GIB,
                "committed_bytes": (index + 1) * GIB,
                "measured_committed_bytes": None,
                "duration_us": 1.0,
            }
        )
        for index in range(5)
    ]
    path = own_events(tmp_path, *commits)
    _, table = ledger(path)
    [row] = table["rows"]
    assert row["kv_committed_bytes"] == 5 * GIB
    assert row["evidence"]["kv_committed_bytes"] == [f"{path}:5"]
