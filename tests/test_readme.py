"""The README's Python examples run as written, each in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvlog.schema.catalog import default_catalog

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 2


def test_readme_catalog_table_names_every_event_at_its_current_version() -> None:
    rows = re.findall(r"^\| (`[^|]+`) \| v(\d+) \|", README.read_text(), flags=re.MULTILINE)
    listed = {name: int(version) for names, version in rows for name in re.findall(r"`([^`]+)`", names)}
    catalog = default_catalog()
    assert listed == {event: catalog.latest(event) for event in catalog.events()}


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(source: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", source], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
