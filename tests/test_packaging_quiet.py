"""The installed environment runs kvlog without noise: nothing warns on stderr at import or in the demo.

Issue 9, item 28: the ``torch`` extra did not bring numpy, so every command that loads the memory
runtime printed torch's ``Failed to initialize NumPy`` warning. These run in the environment that
``scripts/bootstrap`` installs (``pip install -e .[torch,dev]``), as a user runs kvlog there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import SCRIPT

pytest.importorskip("torch", reason="the memory runtime needs the torch extra")

KVLOG = SCRIPT


def test_importing_the_memory_runtime_warns_about_nothing(tmp_path: Path) -> None:
    """Every warning shown once (``-W default``), so that one that is filtered by default counts too."""
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import kvlog.memory, torch; torch.zeros(1).numpy()"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_kvlog_demo_prints_no_warning(tmp_path: Path) -> None:
    done = subprocess.run([str(KVLOG), "demo"], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "Failed to initialize" not in done.stderr, done.stderr
