"""The layers hold: import-linter's contracts (``[tool.importlinter]`` in pyproject.toml) pass on kvlog.

The contracts are the architecture users rely on without knowing it: ``pip install kvlog`` alone can
validate and migrate because the logging core never reaches up to migration, check or the CLI (or
down to torch). The second test proves the contracts bite: the same run on a copy of kvlog with one
import pointing the wrong way fails and names the broken contract.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=project,
        env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_kvlog_keeps_its_layers() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "contract"),
    [
        ("kvlog/schema/codegen.py", "import kvlog.migration.engine", "The logging core imports neither"),
        ("kvlog/schema/catalog.py", "import torch", "The logging core never imports torch"),
        ("kvlog/migration/grammar.py", "import kvlog.cli.failing", "No library module imports the CLI"),
        ("kvlog/io/tailing.py", "import inotify_simple", "The logging core, migration and validation never import the"),
        ("kvlog/metrics/series.py", "import prometheus_client", "The metrics series"),
        ("kvlog/file_validation.py", "import kvlog.metrics.series", "The logging core never imports the metrics layer"),
        ("kvlog/follow/follower.py", "import kvlog.otel", "The OpenTelemetry export is a leaf"),
        # the ledger's rows read the timeline: a plotting import there breaks both contracts
        ("kvlog/plot/timeline.py", "import plotly", "The plot timeline|The ledger works out"),
        ("kvlog/ledger/rows.py", "import plotly", "The ledger works out"),
        ("kvlog/memory/arena.py", "import kvlog.check", "Memory imports neither"),
        ("kvlog/io/inputs.py", "import kvlog.file_validation", "I/O knows no command"),
        ("kvlog/otel/exporter.py", "import kvlog.cli", "No library module imports the CLI"),
        # emission along structlog's lines: the processors know no output, the output no stdlib logging
        ("kvlog/emission/_processors.py", "import kvlog.emission._output", "Emission is layered"),
        ("kvlog/emission/_render.py", "import kvlog.emission._config", "Emission is layered"),
        ("kvlog/emission/_output.py", "import logging", "Emission's stdlib bridge is its one module"),
        # the events generator stays off the runtime path, wherever an import of it would come from
        ("kvlog/events.py", "import kvlog.schema.codegen", "No kvlog module imports the generator"),
        ("kvlog/__init__.py", "from kvlog.schema import codegen", "No kvlog module imports the generator"),
        # a package added tomorrow is covered without being listed: the contract names kvlog.* by pattern
        ("kvlog/newcomer/__init__.py", "import kvlog.cli", "No library module imports the CLI"),
        # an import inside a function counts as much as one at the top: neither may close a cycle
        ("kvlog/io/store.py", "def _f() -> None:\n    import kvlog.io.inputs", "I/O has no import cycle"),
    ],
)
def test_an_import_pointing_the_wrong_way_fails(tmp_path: Path, module: str, wrong_import: str, contract: str) -> None:
    shutil.copytree(ROOT / "kvlog", tmp_path / "kvlog", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    victim = tmp_path / module
    victim.parent.mkdir(exist_ok=True)
    victim.write_text((victim.read_text() if victim.exists() else "") + f"\n{wrong_import}  # noqa\n")
    result = _lint(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    contracts = contract.split("|")  # each contract the import breaks, in the report's order
    assert result.stdout.count("BROKEN") == len(contracts), result.stdout
    report = result.stdout.split("Broken contracts", 1)[1]
    named = [line for line in report.splitlines() if line.strip("- ") and not line.startswith(" ")]
    assert [any(line.startswith(name) for line in named) for name in contracts] == [True] * len(contracts), (
        result.stdout
    )
    assert named[0].startswith(contracts[0]), result.stdout
