"""``scripts/system-deps``: the README's test command never skips the monitoring proofs in silence."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "system-deps"


def run_with_path(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run(
        [bash, str(SCRIPT)],
        env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def link_tools(bin_dir: Path, *names: str) -> None:
    bin_dir.mkdir()
    for name in names:
        found = shutil.which(name)
        assert found is not None, name
        (bin_dir / name).symlink_to(found)


def test_a_machine_that_cannot_install_the_binaries_is_told_in_one_line_which_will_skip(tmp_path: Path) -> None:
    # no apt-get on PATH: nothing can be installed, whoever runs it
    link_tools(tmp_path / "bin", "id")
    result = run_with_path(tmp_path / "bin")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("scripts/test: mtail prometheus chromium not installed")
    assert "the tests that run them will skip" in lines[0]
    assert lines[0].endswith("install with: apt-get install mtail prometheus chromium")


def test_only_the_missing_binaries_are_named(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    link_tools(bin_dir, "id")
    for present in ("mtail", "chromium"):
        (bin_dir / present).write_text("#!/bin/sh\n")
        (bin_dir / present).chmod(0o755)
    result = run_with_path(bin_dir)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("scripts/test: prometheus not installed"), result.stderr

    for present in ("prometheus", "promtool"):
        (bin_dir / present).write_text("#!/bin/sh\n")
        (bin_dir / present).chmod(0o755)
    assert run_with_path(bin_dir).stderr == ""
