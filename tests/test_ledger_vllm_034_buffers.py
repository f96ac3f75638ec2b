"""vLLM 0.34's memory lines once left known: a drafter's workspace, repacked weights, a daemon's weights.

Where each lies was read in vLLM 0.34.0's released code, and the ledger follows it. Kimi K3's DSpark
drafter reserves its CAKE workspace in its ``process_weights_after_loading``, which the speculator's
``load_model`` runs inside the runner's ``DeviceMemoryProfiler``: inside ``Model loading took``, so no
consumer of its own. Mistral Large 4's and Muse Spark's specialized decodes build their repacked weights
and expert-TP shards in the model state, which the runner makes after that line is printed, beside the
stock weights they never replace: ``aux_buffers``. A weight-cache daemon's weights are held by the
daemon's own process: no consumer of any engine rank (another process's memory is that rank's
unaccounted memory, which the event explains). Figures checked by hand in the units vLLM prints.
"""

from __future__ import annotations

from pathlib import Path

from test_ledger_vllm_buffers import event, in_units, ledger

GIB = 1 << 30
MIB = 1 << 20
#: what ``%.2f`` GiB (or ``format_gib``'s ``round(x, 2)``) hides, rounded up as the migration records it
HALF_GIB = 5368710

LOAD = (
    "(Worker_TP0 pid=2210) INFO 11-20 09:59:10 [model_runner.py:442] Model loading took 37.52 GiB memory "
    "and 41.200000 seconds"
)
CAKE = (
    "(Worker_TP0 pid=2210) INFO 11-20 09:59:09 [model.py:220] Specialized DSpark drafter: 61 linears on DraftGemm, "
    "CAKE workspace 324 MiB, collectives mailbox, DCP attention stock"
)
MISTRAL = (
    "(Worker_TP0 pid=2210) INFO 11-20 09:59:12 [runner.py:142] Mistral Large 4 specialized decode: 87 layer "
    "launches (dense x3, moe x84), rows (1, 2, 4, 8), 3.42 GiB of repacked weights per rank"
)
MUSE = (
    "(Worker_TP0 pid=2210) INFO 11-20 09:59:13 [flashinfer_ops.py:748] Muse Spark expert TP built: TP8, 44 NVFP4 "
    "layers (4 BF16 layers EP), 32 experts at intermediate 2048 per rank, +1.25 GiB per rank, probe rel L2 "
    "0.00123..0.00456, tactic 3 at 64 tokens (pinned), 12.3 s"
)
DAEMON = (
    "(Worker_TP0 pid=2210) INFO 11-20 09:58:01 [daemon.py:318] Weight cache primary daemon rank 0 loaded model "
    "(61.5 GiB allocated, 62.01 GiB reserved)"
)


def test_the_drafters_cake_workspace_is_read_in_whole_mib_and_stays_inside_the_load(tmp_path: Path) -> None:
    read = event(CAKE)
    assert (read["event"], read["kind"], read["name"]) == ("memory.buffer_allocated", "load_workspace", "cake")
    assert read["size_bytes"] == 324 * MIB  # %.0f MiB: rounded to nearest, half a MiB either way
    assert read["migrated"]["uncertainty_bytes"] == {"size_bytes": MIB // 2}
    row = ledger(tmp_path, CAKE, LOAD)
    assert row["consumers"]["aux_buffers_bytes"] is None  # inside the load's own figure, not added again
    assert row["consumers"]["weights_bytes"] == in_units("37.52", GIB)


def test_repacked_weights_built_after_the_load_is_measured_add_to_aux_buffers(tmp_path: Path) -> None:
    mistral, muse = event(MISTRAL), event(MUSE)
    assert (mistral["kind"], mistral["name"], mistral["size_bytes"]) == (
        "repacked_weights",
        "mistral_large4_decode",
        in_units("3.42", GIB),
    )
    assert (muse["kind"], muse["name"], muse["size_bytes"]) == (
        "repacked_weights",
        "muse_spark_expert_tp",
        in_units("1.25", GIB),  # the `+X GiB per rank`, not the probe's or the timing's figures
    )
    row = ledger(tmp_path, LOAD, MISTRAL, MUSE)
    assert row["consumers"]["aux_buffers_bytes"] == in_units("3.42", GIB) + in_units("1.25", GIB)
    assert row["uncertainty_bytes"]["aux_buffers_bytes"] == 2 * HALF_GIB
    assert row["evidence"]["aux_buffers_bytes"] == [f"{tmp_path / 'vllm.log'}:2", f"{tmp_path / 'vllm.log'}:3"]
    assert row["consumers"]["weights_bytes"] == in_units("37.52", GIB)  # the stock weights, kept beside them


def test_a_weight_cache_daemons_weights_are_another_processs_memory_no_consumer_of_the_rank(tmp_path: Path) -> None:
    read = event(DAEMON)
    assert (read["kind"], read["name"]) == ("external_weights", "primary")
    assert read["size_bytes"] == in_units("62.01", GIB)  # torch's reserved memory: what the process holds
    assert read["migrated"]["uncertainty_bytes"] == {"size_bytes": HALF_GIB}
    row = ledger(tmp_path, DAEMON, LOAD)
    assert row["consumers"]["aux_buffers_bytes"] is None
    assert row["consumers"]["weights_bytes"] == in_units("37.52", GIB)
