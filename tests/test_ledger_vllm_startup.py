"""``kvlog ledger`` on vLLM V1 start-ups: the worker's start-up summary states the device and its consumers.

The cases are start-ups pasted in public logs; each figure is checked by hand against the line, in the
units the line prints (``round(bytes / 2**30, 2)`` GiB, the suggested ``--kv-cache-memory`` in exact
bytes), and vLLM's own arithmetic is redone here from the printed figures (``gpu_worker.py``: the
suggestion is the free memory, or the budget, less the consumers and a 150 MiB buffer), so that the
test does not lean on the code it tests.
"""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from kvlog import commands

GIB = 1 << 30
#: what a figure of ``round(x, 2)`` GiB hides: 0.005 GiB, rounded up as the migration records it
HALF = 5368710
#: the buffer vLLM leaves below both suggestions (``redundancy_buffer_memory``)
BUFFER = 150 << 20

#: a TP2 start-up on H200s, vLLM 0.10.2's wording (the suggestions and the KV cache in bytes), rank 1
VLLM_0_10_2 = "".join(
    (
        "(Worker_TP1 pid=1806414) INFO 10-23 15:14:30 [gpu_worker.py:298] Available KV cache memory: 44.59 GiB\n",
        "(Worker_TP1 pid=1806414) INFO 10-23 15:14:56 [gpu_model_runner.py:3118] Graph capturing finished in 25 secs, took 2.37 GiB\n",  # noqa: E501
        "(Worker_TP1 pid=1806414) INFO 10-23 15:14:56 [gpu_worker.py:391] Free memory on device (139.21/139.81 GiB) on startup. Desired GPU memory utilization is (0.9, 125.83 GiB). Actual usage is 74.28 GiB for weight, 5.58 GiB for peak activation, 1.38 GiB for non-torch memory, and 2.37 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=45175492096` to fit into requested memory, or `--kv-cache-memory=59540753920` to fully utilize gpu memory. Current kv cache memory in use is 47878721024 bytes.\n",  # noqa: E501
    )
)
#: a TP3 start-up of a 0.26 build with the 0.27 wording (weights and non-torch memory as one figure), rank 0
VLLM_0_27 = "".join(
    (
        "(Worker_TP0_EP0 pid=1159) INFO 09-04 11:00:12 [gpu_worker.py:624] Available KV cache memory: 17.79 GiB\n",
        "(Worker_TP0_EP0 pid=1159) INFO 09-04 11:00:17 [gpu_worker.py:855] Free memory on device (91.64/94.97 GiB) on startup. Desired GPU memory utilization is (0.91, 86.42 GiB). Actual usage is 64.44 GiB for consumed memory (weights + non-torch), 4.19 GiB for peak activation, and 0.25 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=18676332626` (17.39 GiB) to fit into requested memory, or `--kv-cache-memory=24274632704` (22.61 GiB) to fully utilize gpu memory. Current kv cache memory in use is 17.79 GiB.\n",  # noqa: E501
    )
)


def gib(printed: str) -> int:
    return int((Decimal(printed) * GIB).to_integral_value())


def ledger(path: Path) -> dict[str, Any]:
    out = io.BytesIO()
    commands.ledger([str(path)], output_format="json", stdout=out)
    [row] = json.loads(out.getvalue())["rows"]
    return dict(row)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "vllm.log"
    path.write_text(text)
    return path


def test_a_0_10_2_start_up_fills_the_device_and_every_consumer_from_its_summary(tmp_path: Path) -> None:
    path = write(tmp_path, VLLM_0_10_2)
    row = ledger(path)
    consumers = row["consumers"]
    assert row["device_total_bytes"] == gib("139.81")
    assert row["budget_bytes"] == gib("125.83")
    assert consumers["weights_bytes"] == gib("74.28")
    assert consumers["activation_peak_bytes"] == gib("5.58")
    assert consumers["non_torch_bytes"] == gib("1.38")
    assert consumers["cuda_graph_bytes"] == gib("2.37")
    assert row["kv_committed_bytes"] == 47878721024  # printed in bytes: exact
    assert row["uncertainty_bytes"]["kv_committed_bytes"] == 0
    for name in ("weights_bytes", "activation_peak_bytes", "non_torch_bytes", "cuda_graph_bytes"):
        assert row["uncertainty_bytes"][name] == HALF
        assert row["evidence"][name] == [f"{path}:3"]
    assert row["evidence"]["device_total_bytes"] == [f"{path}:3"]
    # the summary states the free memory at start, not at the end of start-up: neither is guessed
    assert row["free_bytes"] is None
    assert row["unaccounted_bytes"] is None


def test_the_0_10_2_summary_adds_up_by_hand_within_its_rounding(tmp_path: Path) -> None:
    row = ledger(write(tmp_path, VLLM_0_10_2))
    consumers = row["consumers"]
    used = sum(consumers[name] for name in ("weights_bytes", "activation_peak_bytes", "non_torch_bytes"))
    used += consumers["cuda_graph_bytes"]
    # by hand: 74.28 + 5.58 + 1.38 + 2.37 = 83.61 GiB
    assert abs(used - gib("83.61")) <= 4 * HALF
    # vLLM's suggestions: 139.21 - 83.61 - 150 MiB = 55.4535 GiB (printed 59540753920 B, 55.4516 GiB) and
    # 125.83 - 83.61 - 150 MiB = 42.0735 GiB (printed 45175492096 B, 42.0730 GiB), within the five figures' rounding
    assert abs(gib("139.21") - used - BUFFER - 59540753920) <= 5 * HALF
    assert abs(row["budget_bytes"] - used - BUFFER - 45175492096) <= 5 * HALF
    # the budget is the total times the utilization: 139.81 x 0.9 = 125.829 GiB
    assert abs(row["device_total_bytes"] * 0.9 - row["budget_bytes"]) <= 2 * HALF
    # 83.61 GiB of consumers and 44.59 GiB of KV cache: 128.20 GiB after capture, above the 125.83 GiB budget
    # (0.10.2 sized the KV cache before capturing the graphs): the ledger flags it
    assert used + row["kv_committed_bytes"] - row["budget_bytes"] > 2 * GIB
    assert [flag.split(":")[0] for flag in row["flags"]] == ["budget_exceeded"]


def test_a_0_27_summary_states_the_weights_and_non_torch_memory_as_one_figure_the_ledger_leaves_apart(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, VLLM_0_27)
    row = ledger(path)
    consumers = row["consumers"]
    assert row["device_total_bytes"] == gib("94.97")
    assert row["budget_bytes"] == gib("86.42")
    assert consumers["activation_peak_bytes"] == gib("4.19")
    assert consumers["cuda_graph_bytes"] == gib("0.25")
    # 64.44 GiB of weights and non-torch memory together: neither consumer alone, so each stays unknown
    assert consumers["weights_bytes"] is None
    assert consumers["non_torch_bytes"] is None
    assert row["kv_committed_bytes"] == gib("17.79")
    assert row["evidence"]["kv_committed_bytes"] == [f"{path}:2"]  # the summary restates the KV cache
    # by hand, vLLM's suggestion to fill the device: 91.64 - 64.44 - 4.19 - 0.25 - 150 MiB = 22.6135 GiB,
    # printed 24274632704 B (22.6075 GiB): within the four figures' rounding
    used = gib("64.44") + consumers["activation_peak_bytes"] + consumers["cuda_graph_bytes"]
    assert abs(gib("91.64") - used - BUFFER - 24274632704) <= 4 * HALF
    assert abs(row["budget_bytes"] - used - BUFFER - 18676332626) <= 4 * HALF
    assert row["flags"] == []  # 64.44 + 4.19 + 0.25 + 17.79 = 86.67 GiB counts only what the ledger knows


def test_a_kv_cache_set_by_kv_cache_memory_is_the_run_s_kv_cache_and_its_free_memory_no_total(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "(EngineCore_DP0 pid=7) INFO 10-14 16:37:05 [gpu_model_runner.py:2602] Model loading took 14.2 GiB memory and 6.1 seconds\n"  # noqa: E501
        "(EngineCore_DP0 pid=7) INFO 10-14 16:37:13 [gpu_worker.py:250] Initial free memory 70.5 GiB, reserved 20.0 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does not respect the gpu_memory_utilization config.\n",  # noqa: E501
    )
    row = ledger(path)
    assert row["consumers"]["weights_bytes"] == gib("14.2")
    assert row["kv_committed_bytes"] == gib("20.0")
    assert row["evidence"]["kv_committed_bytes"] == [f"{path}:2"]
    assert row["device_total_bytes"] is None  # the free memory at start is no device total


def test_the_graph_pool_beside_its_estimate_is_the_cuda_graph_consumer_and_the_estimate_is_not(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "(EngineCore pid=986) INFO 09-04 10:59:40 [gpu_model_runner.py:4200] Model loading took 61.74 GiB memory and 80.2 seconds\n"  # noqa: E501
        "(EngineCore pid=986) INFO 09-04 11:00:12 [gpu_model_runner.py:6143] Estimated CUDA graph memory: 0.38 GiB total\n"  # noqa: E501
        "(EngineCore pid=986) INFO 09-04 11:00:17 [gpu_worker.py:792] CUDA graph pool memory: 0.25 GiB (actual), 0.38 GiB (estimated), difference: 0.12 GiB (50.0%).\n",  # noqa: E501
    )
    row = ledger(path)
    assert row["consumers"]["cuda_graph_bytes"] == gib("0.25")  # what the pool holds, not the 0.38 GiB estimated
    assert row["evidence"]["cuda_graph_bytes"] == [f"{path}:3"]
    assert row["consumers"]["weights_bytes"] == gib("61.74")


def test_free_memory_after_profiling_is_no_end_of_start_up_and_a_startup_plan_sets_the_kv_cache(tmp_path: Path) -> None:
    """The profile's free memory is measured before the KV cache is allocated: the row's free memory is not it."""
    path = write(
        tmp_path,
        "(EngineCore_DP0 pid=7) INFO 10-14 16:37:05 [gpu_model_runner.py:2602] Model loading took 14.2 GiB memory and 6.1 seconds\n"  # noqa: E501
        "(EngineCore_DP0 pid=7) DEBUG 10-14 16:37:10 [gpu_worker.py:783] Initial free memory: 78.84 GiB; Requested memory: 0.900000 (util), 71.02 GiB\n"  # noqa: E501
        "(EngineCore_DP0 pid=7) DEBUG 10-14 16:37:10 [gpu_worker.py:789] Free memory after profiling: 62.9 GiB (total), 55.08 GiB (within requested)\n"  # noqa: E501
        "(EngineCore_DP0 pid=7) INFO 10-14 16:37:10 [gpu_worker.py:795] Available KV cache memory: 55.08 GiB\n",
    )
    row = ledger(path)
    assert row["budget_bytes"] == gib("71.02")
    assert row["kv_committed_bytes"] == gib("55.08")
    assert row["free_bytes"] is None and row["unaccounted_bytes"] is None
    plan = write(
        tmp_path,
        "(EngineCore_DP0 pid=7) INFO 10-14 16:37:05 [gpu_model_runner.py:2602] Model loading took 14.2 GiB memory and 6.1 seconds\n"  # noqa: E501
        "(EngineCore_DP0 pid=7) INFO 10-14 16:37:09 [startup_plan.py:154] Applying persisted startup plan (fingerprint 3f2a9c1b): kv_cache_memory_bytes=23085449216 (21.50 GiB), recorded free-memory baseline 78.84 GiB, current 78.84 GiB. Memory profiling will be skipped.\n",  # noqa: E501
    )
    row = ledger(plan)
    assert row["kv_committed_bytes"] == 23085449216  # printed in bytes: exact
    assert row["uncertainty_bytes"]["kv_committed_bytes"] == 0


def test_an_xpu_profile_run_states_the_device_total_the_model_s_load_and_the_non_torch_memory(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "INFO 07-20 10:00:05 [xpu_worker.py:123] Before memory profiling run, total GPU memory: 65536.00 MB, model load takes 15317.25 MB, free gpu memory is 49152.50 MB.\n"  # noqa: E501
        "INFO 07-20 10:00:09 [xpu_worker.py:150] After memory profiling run, peak memory usage is 17408.75 MB,torch mem is 15400.10 MB, non-torch mem is 2008.65 MB, free gpu memory is 31743.75 MB.\n"  # noqa: E501
        "INFO 07-20 10:00:09 [xpu_worker.py:160] Available KV cache memory: 27.01 GiB\n",
    )
    row = ledger(path)
    mib = 1 << 20
    assert row["device_total_bytes"] == 65536 * mib  # the MB of xpu_worker.py are 1024 ** 2 bytes
    assert row["consumers"]["weights_bytes"] == round(15317.25 * mib)
    assert row["consumers"]["non_torch_bytes"] == round(2008.65 * mib)
    assert row["kv_committed_bytes"] == gib("27.01")
    assert row["free_bytes"] is None  # the free memory after the run is before the KV cache's allocation
