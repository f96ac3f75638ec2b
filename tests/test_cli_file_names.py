r"""Every command that names a file on the console escapes the name the same way (``printable_name``).

A name holding a newline would otherwise end the line and start one of its own (a CI ``::error``
command), and a backslash would make ``a\nb`` (four characters) look like a name with a newline.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlog.cli.migrate import migrate
from kvlog.cli.plot import plot
from kvlog.cli.summarize import summarize
from kvlog.cli.validate import validate

CORPUS = Path(__file__).parent / "corpus"
#: a newline and a backslash: escaped, ``a\\b\nc``
NAME = "a\\b\nc"
SHOWN = "a\\\\b\\nc"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / f"{NAME}.log"
    shutil.copyfile(CORPUS / "gen2_2025.log", path)
    return path


def _run(command: object, args: list[str]) -> str:
    result = CliRunner().invoke(command, args)  # type: ignore[arg-type]
    return result.output


def test_migrate_names_a_missing_input_escaped(tmp_path: Path) -> None:
    output = _run(migrate, [str(tmp_path / f"{NAME}.log"), "--dry-run"])
    assert f"{SHOWN}.log" in output
    assert NAME not in output


def test_validate_names_the_file_of_a_finding_escaped(log: Path) -> None:
    output = _run(validate, [str(log)])
    assert f"{SHOWN}.log:1:" in output
    assert NAME not in output


def test_summarize_names_the_source_of_a_row_escaped(log: Path) -> None:
    output = _run(summarize, [str(log)])
    assert f"{SHOWN}.log" in output
    assert NAME not in output


def test_plot_names_the_figure_written_escaped(log: Path, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    output = _run(plot, [str(log), "-o", str(tmp_path / f"{NAME}.html")])
    assert f"{SHOWN}.html" in output
    assert NAME not in output
