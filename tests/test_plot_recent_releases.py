"""Adversarial review of ``kvlog plot``: lines of recent sglang releases the first tests did not draw."""

from __future__ import annotations

from pathlib import Path

import pytest
from plot_helpers import GIB, runs_of

AT = "[2026-11-02 08:04:40 TP0] "
LOAD = f"{AT}Load weight begin. avail mem=139.28 GB"
TARGET = f"{AT}KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1523712, K size: 25.00 GB, V size: 25.00 GB"
SIZED = f"{AT}Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 1000000, KV size: 30.00 GB, avail mem=5.00 GB"  # noqa: E501
DRAFT_ALLOCATED = f"{AT}KV Cache is allocated. dtype: torch.bfloat16, #tokens: 15237, K size: 0.50 GB, V size: 0.50 GB"
DRAFT_SIZED = (
    f"{AT}Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: 1000000, KV size: 0.60 GB"
)


@pytest.mark.parametrize(
    ("lines", "committed"),
    [
        # the draft's pool was allocated before capture (1 GiB), then resized: drawn at its new size, once
        ([LOAD, TARGET, DRAFT_ALLOCATED, SIZED, DRAFT_SIZED], 30 * GIB + round(0.60 * GIB)),
        # the draft's pool first appears in its post-capture line: its memory is drawn all the same
        ([LOAD, TARGET, SIZED, DRAFT_SIZED], 30 * GIB + round(0.60 * GIB)),
    ],
)
def test_the_drafts_post_capture_sizing_is_drawn_as_the_drafts_memory(
    tmp_path: Path, lines: list[str], committed: int
) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    [run] = runs_of(log)
    last = run.samples[-1]
    assert last.event == "kv_pool.post_capture_sized"
    assert last.kv_committed == committed
    assert last.kv_va_bound == 50 * GIB - 30 * GIB  # the target's address space beyond what it committed
