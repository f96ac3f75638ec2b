"""The README's Python examples run as written, each in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from release_helpers import tag_known

from kvlog import commands
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


def test_the_counts_quoted_of_kvlogs_own_catalog_are_its_real_counts() -> None:
    quoted = re.findall(r"\((\d+) schema files, (\d+) migration steps, (\d+) corpus files", README.read_text())
    assert quoted, "the README quotes kvlog check's summary line"
    report = commands.check(README.parent).report
    real = (report.schema_files, report.migration_steps, report.corpus_files)
    assert {tuple(map(int, counts)) for counts in quoted} == {real}


INSTALL = re.search(r"## Install\n(.*?)\n## ", README.read_text(), flags=re.DOTALL)


def test_the_install_lines_name_the_projects_extras_and_the_wheel_its_build_writes() -> None:
    assert INSTALL is not None
    section = INSTALL.group(1)
    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    named = {extra for group in re.findall(r"pip install '\.\[([^\]]+)\]'", section) for extra in group.split(",")}
    assert named and named <= extras, named - extras
    assert extras - {"dev"} <= named, "every extra a user may want is shown"
    wheel = f"kvlog-{project['version']}-py3-none-any.whl"
    assert f"dist/{wheel}" in section
    assert "pip install kvlog" not in section, "kvlog is not on the package index"


def test_the_release_the_readme_names_is_a_tag_of_this_repository() -> None:
    """The clone line and the pre-commit snippet name one release, and git knows it as a tag."""
    text = README.read_text()
    clone = re.findall(r"git clone --branch (\S+) ", text)
    revs = re.findall(r"^\s+rev: (\S+)$", text, flags=re.MULTILINE)
    assert clone and revs and set(clone) == set(revs), (clone, revs)
    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    assert revs[0] == f"v{project['version']}"
    known = tag_known(revs[0])
    if known is None:
        pytest.skip("this checkout carries no tags (a clone of one branch, as CI's); the release is tagged upstream")
    assert known, f"{revs[0]} is not a tag here: `git tag {revs[0]}` the release"
