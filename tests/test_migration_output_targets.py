"""Outputs that are not plain files: a FIFO stays a FIFO, a symlink stays a link.

An atomic rename over such a target would replace the node itself; run as root on a CI machine,
``kvlog migrate -o /dev/null`` once turned /dev/null into a regular file that way.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from kvlog import commands

OLD_LINE = b"[2025-03-27 21:33:31 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB\n"


def test_a_fifo_output_is_written_through_not_replaced(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_bytes(OLD_LINE)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = commands.migrate(log, output=fifo)
    reader.join(timeout=60)
    assert done.exit_status == 0, done.problems
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert b'"event":"kv_pool.allocation"' in received[0]


def test_a_symlinked_output_keeps_the_link_and_replaces_the_file_it_names(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_bytes(OLD_LINE)
    real = tmp_path / "real.jsonl"
    real.write_bytes(b"stale\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    done = commands.migrate(log, output=link)
    assert done.exit_status == 0, done.problems
    assert link.is_symlink()
    assert b'"event":"kv_pool.allocation"' in real.read_bytes()
