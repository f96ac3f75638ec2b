"""vLLM's auxiliary device buffers, encoder graphs, cache releases, weight updates and the 0.32+ auto-fit lines.

Each line is read into its event with every figure the line prints, and the ledger adds a buffer to
``aux_buffers`` only where no other figure of the run already holds it: the prefetch offloader's pool
(allocated after ``Model loading took`` is measured) and the routed-experts capture buffer (after the KV
cache is sized, before the capture is measured) add; the workspace grows in the profile run and the
capture, and the verify records and candidate buffers are allocated with the model, so their memory is
inside the activation peak, the graphs' cost or the weights, and adding it would count it twice.
Figures are checked by hand against the printed text, in the unit vLLM's code prints them in.
"""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from kvlog import commands
from tests.migration_helpers import migrate

GIB = 1 << 30
MIB = 1 << 20
#: what ``round(x, 2)`` or ``%.2f`` GiB hides, rounded up as the migration records it
HALF_GIB = 5368710
#: what ``%.2f`` MiB hides
HALF_MIB = 5243

#: pasted in local-inference-lab/vllm#227 (the b12x reserve before the workspace locks), behind a worker's prefix
WORKSPACE = (
    "(Worker_TP0 pid=2210) INFO 08-02 10:00:05 [workspace.py:316] [WORKSPACE DEBUG] Resized workspace from "
    "'b12x.py:563:_reserve_dummy_compressed_mla_scratch': 0.00 MB -> 321.50 MB (ubatch 0, lane 0)"
)
LOAD = (
    "(Worker_TP0 pid=2210) INFO 08-02 09:59:10 [gpu_model_runner.py:4120] Model loading took 37.52 GiB memory "
    "and 41.2 seconds"
)
PREFETCH = (
    "(Worker_TP0 pid=2210) INFO 08-02 09:59:11 [prefetch.py:381] [PrefetchOffloader] Initialized 48 modules. "
    "Total GPU memory saved: 28.4160 GB, Static buffer pool: 1.2080 GB (group_size=8, num_in_group=2, "
    "prefetch_step=1, mode=cpu)"
)
ROUTED = (
    "(Worker_TP0 pid=2210) INFO 08-02 10:01:02 [routed_experts_capturer.py:90] Routing experts device buffer "
    "allocated. shape=(48, 8192, 8), size=12.00 MB"
)
KDA = (
    "(Worker_TP0 pid=2210) INFO 08-02 09:59:09 [kda.py:753] Allocated the KDA RecoverSSM verify records: 0.75 GiB "
    "in total for 256 requests (3.00 MiB per request)."
)


def engine_load(pid: int) -> str:
    """The weights' line of an engine-core process (a ledger row is a rank's: its lines share the prefix)."""
    return f"(EngineCore_DP0 pid={pid}) " + LOAD.split(") ", 1)[1]


def event(line: str) -> dict[str, Any]:
    [out] = migrate(line)
    assert isinstance(out, dict), out
    return out


def ledger(tmp_path: Path, *lines: str) -> dict[str, Any]:
    path = tmp_path / "vllm.log"
    path.write_text("".join(line + "\n" for line in lines))
    out = io.BytesIO()
    commands.ledger([str(path)], output_format="json", stdout=out)
    [row] = json.loads(out.getvalue())["rows"]
    return dict(row)


def in_units(printed: str, per_unit: int) -> int:
    return int((Decimal(printed) * per_unit).to_integral_value())


def test_a_workspace_resize_is_a_buffer_of_its_ubatch_and_lane() -> None:
    read = event(WORKSPACE)
    assert read["event"] == "memory.buffer_allocated" and read["schema_version"] == 2
    assert (read["kind"], read["ubatch"], read["lane"]) == ("workspace", 0, 0)
    assert read["size_bytes"] == in_units("321.50", MIB)  # _MB = 1024**2
    assert read["migrated"]["uncertainty_bytes"] == {"size_bytes": HALF_MIB}


def test_the_0_13_workspace_line_states_every_ubatch_at_once() -> None:
    read = event(
        "(EngineCore_DP0 pid=4242) INFO 01-10 10:00:05 [workspace.py:165] [WORKSPACE DEBUG] Resized workspace from "
        "'modular_kernel.py:1167:_allocate_buffers': 3.75 MB -> 146.41 MB (2 ubatches, total memory 292.82 MB)"
    )
    assert (read["kind"], read["ubatch"], read["lane"]) == ("workspace", None, None)
    assert read["size_bytes"] == in_units("292.82", MIB)  # the total, not one ubatch's 146.41


def test_the_prefetch_pool_and_the_routed_experts_buffer_add_to_aux_buffers_and_the_workspace_does_not(
    tmp_path: Path,
) -> None:
    pool = event(PREFETCH)
    assert (pool["kind"], pool["size_bytes"], pool["offloaded_bytes"]) == ("prefetch_pool", 1208000000, 28416000000)
    assert pool["migrated"]["uncertainty_bytes"] == {"size_bytes": 50000, "offloaded_bytes": 50000}  # 0.00005 GB
    routed = event(ROUTED)
    assert (routed["kind"], routed["name"]) == ("state_capture", "routed_experts")
    assert routed["size_bytes"] == in_units("12.00", MIB)

    row = ledger(tmp_path, KDA, LOAD, PREFETCH, WORKSPACE, ROUTED)
    consumers = row["consumers"]
    assert consumers["aux_buffers_bytes"] == 1208000000 + in_units("12.00", MIB)
    assert row["uncertainty_bytes"]["aux_buffers_bytes"] == 50000 + HALF_MIB
    assert row["evidence"]["aux_buffers_bytes"] == [f"{tmp_path / 'vllm.log'}:3", f"{tmp_path / 'vllm.log'}:5"]
    # the verify records were allocated with the model: inside the load's own figure, not added again
    assert consumers["weights_bytes"] == in_units("37.52", GIB)


def test_buffers_inside_other_figures_leave_aux_buffers_unknown(tmp_path: Path) -> None:
    records = event(KDA)
    assert (records["kind"], records["slots"]) == ("verify_records", 256)
    assert (records["size_bytes"], records["slot_bytes"]) == (in_units("0.75", GIB), in_units("3.00", MIB))
    row = ledger(tmp_path, KDA, LOAD, WORKSPACE)
    assert row["consumers"]["aux_buffers_bytes"] is None  # no line states a buffer outside other figures


def test_an_encoder_only_capture_is_the_runs_cuda_graph_memory(tmp_path: Path) -> None:
    line = (
        "(EngineCore_DP0 pid=812) INFO 10-12 09:14:03 [mm_encoder_model_runner.py:95] Encoder graph capturing "
        "finished in 6 secs, took 0.42 GiB (12 graphs)"
    )
    read = event(line)
    assert (read["event"], read["elapsed_s"], read["mem_usage_bytes"]) == (
        "cuda_graph.captured",
        6.0,
        in_units("0.42", GIB),
    )
    row = ledger(tmp_path, engine_load(812), line)
    assert row["consumers"]["cuda_graph_bytes"] == in_units("0.42", GIB)
    assert row["uncertainty_bytes"]["cuda_graph_bytes"] == HALF_GIB


def test_the_0_32_auto_fit_line_is_the_kv_memory_it_fits_to(tmp_path: Path) -> None:
    line = (
        "(EngineCore_DP0 pid=5120) INFO 10-20 09:30:41 [kv_cache_utils.py:1479] Auto-fit max_model_len: reduced "
        "from 1048576 to 393216 to fit in available KV cache memory (41.27 GiB GPU + 8.0 GiB host)"
    )
    read = event(line)
    assert (read["event"], read["available_bytes"], read["deficit"]) == (
        "kv_pool.memory_available",
        in_units("41.27", GIB),  # the device's: HiSparse's host pool is host memory
        False,
    )
    assert ledger(tmp_path, engine_load(5120), line)["kv_committed_bytes"] == in_units("41.27", GIB)


def test_a_weight_update_borrowing_the_kv_cache_states_the_free_memory_then() -> None:
    read = event(
        "(Worker_TP0 pid=1877) INFO 11-20 14:02:11 [extensible_kv_cache.py:780] Releasing the emptied KV cache's "
        "memory for a weight update: 3.12 GiB free, about 9.38 GiB needed."
    )
    assert (read["event"], read["stage"], read["source"]) == ("weights.updated", "begin", None)
    assert read["avail_bytes"] == in_units("3.12", GIB)  # the estimate of what is needed is no memory


def test_a_cache_release_under_pressure_states_what_went_back_and_no_reserved_figure() -> None:
    read = event(
        "(EngineCore_DP0 pid=611) DEBUG 07-14 08:21:37 [mem_utils.py:77] Released 1.75GiB of cached device memory "
        "under memory pressure"
    )
    assert (read["event"], read["schema_version"]) == ("memory.cache_emptied", 2)
    assert read["freed_bytes"] == in_units("1.75", GIB)
    assert (read["reserved_before_bytes"], read["reserved_after_bytes"]) == (None, None)
