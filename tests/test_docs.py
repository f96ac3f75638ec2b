"""The README and the ``docs/`` pages say what kvlog does: their examples run as written, their figures are real.

Each ``python`` block of every page runs in a fresh interpreter; the README's quick start runs command by
command and prints what the page shows; the counts, tables, releases and links they quote are checked
against the tree, so a page that drifts from the code fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from docs_helpers import (
    PAGES,
    README,
    ROOT,
    anchors,
    blocks,
    console_session,
    name_of,
    page,
    prose,
    run_console,
    section,
)
from release_helpers import PINNED_REV, tag_known

from kvlog import commands
from kvlog.schema.catalog import default_catalog

#: (page, its n-th python block, the source)
EXAMPLES = [(path, n, source) for path in PAGES for n, source in enumerate(blocks(path, "python"))]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_no_example_was_lost_moving_the_reference_into_docs() -> None:
    """The README held 12 Python examples before its reference moved to ``docs/``; each page keeps its own."""
    assert len(EXAMPLES) >= 12
    with_examples = {name_of(path) for path, _, _ in EXAMPLES}
    expected = {"emitting", "memory", "migrate", "follow", "metrics", "plot", "check", "api"}
    assert {f"docs/{name}.md" for name in expected} <= with_examples


@pytest.mark.parametrize(
    "source",
    [source for _, _, source in EXAMPLES],
    ids=[f"{name_of(path)}:{n}" for path, n, _ in EXAMPLES],
)
def test_doc_example_runs(source: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", source], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def test_the_readmes_quick_start_prints_what_it_shows(tmp_path: Path) -> None:
    """The first screen migrates an sglang log: each ``kvlog`` and ``cat`` line prints exactly the lines below it."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    sessions = [
        console_session(block) for block in re.findall(r"```console\n(.*?)```", section(README, "Quick start"), re.S)
    ]
    commands_run = [step for session in sessions for step in session]
    assert [command.split()[:2] for command, _ in commands_run] == [
        ["cat", "examples/sglang-post-capture.log"],
        ["kvlog", "migrate"],
        ["kvlog", "migrate"],
        ["kvlog", "validate"],
    ]
    for command, expected in commands_run:
        assert run_console(command, tmp_path) == expected, command
    assert "KV Cache VA upper bound." in "\n".join(commands_run[1][1]), "the quick start shows the reservation typed"


def test_the_catalog_table_names_every_event_at_its_current_version() -> None:
    rows = re.findall(r"^\| (`[^|]+`) \| v(\d+) \|", page("docs/catalog.md").read_text(), flags=re.MULTILINE)
    listed = {name: int(version) for names, version in rows for name in re.findall(r"`([^`]+)`", names)}
    catalog = default_catalog()
    assert listed == {event: catalog.latest(event) for event in catalog.events()}


def test_the_counts_quoted_of_kvlogs_own_catalog_are_its_real_counts() -> None:
    text = "".join(path.read_text() for path in PAGES)
    quoted = re.findall(r"\((\d+) schema files, (\d+) migration steps, (\d+) corpus files", text)
    assert quoted, "the docs quote kvlog check's summary line"
    report = commands.check(ROOT).report
    real = (report.schema_files, report.migration_steps, report.corpus_files)
    assert {tuple(map(int, counts)) for counts in quoted} == {real}


def test_the_harvest_quoted_is_the_harvest_in_formats() -> None:
    """docs/formats.md's count of formats and first releases are those of ``formats/<server>.json``."""
    text = page("docs/formats.md").read_text()
    quoted = re.search(r"every sglang\s+release since (\S+) and every vLLM release since (\S+) on PyPI", text)
    counts = re.search(r"(\d+) sglang and (\d+) vLLM formats", text)
    assert quoted is not None and counts is not None
    harvest = {server: json.loads((ROOT / "formats" / f"{server}.json").read_text()) for server in ("sglang", "vllm")}
    assert quoted.groups() == (harvest["sglang"]["releases"][0], harvest["vllm"]["releases"][0])
    assert tuple(map(int, counts.groups())) == (len(harvest["sglang"]["formats"]), len(harvest["vllm"]["formats"]))


def test_the_exit_table_is_the_statuses_commands_return() -> None:
    table = re.findall(r"^\| (\d+|128 \+ N) \|", page("docs/exit-codes.md").read_text(), flags=re.MULTILINE)
    named = {int(status) for status in table if status.isdigit()}
    constants = {getattr(commands, name) for name in dir(commands) if name.startswith("EXIT_")}
    assert named == constants | {141}
    assert "128 + N" in table


def test_the_install_lines_name_the_projects_extras_and_the_wheel_its_build_writes() -> None:
    install = section(README, "Install")
    extras = set(PROJECT["optional-dependencies"])
    named = {extra for group in re.findall(r"pip install '\.\[([^\]]+)\]'", install) for extra in group.split(",")}
    assert named and named <= extras, named - extras
    assert extras - {"dev"} <= named, "every extra a user may want is shown"
    wheel = f"kvlog-{PROJECT['version']}-py3-none-any.whl"
    assert f"dist/{wheel}" in install
    assert "pip install kvlog" not in install, "kvlog is not on the package index"


def test_the_release_the_docs_name_is_a_tag_of_this_repository() -> None:
    """The README's clone line and docs/check.md's pre-commit snippet name one release, and git knows it as a tag."""
    clone = re.findall(r"git clone --branch (\S+) ", section(README, "Install"))
    revs = re.findall(r"^\s+rev: (\S+)$", "".join(path.read_text() for path in PAGES), flags=re.MULTILINE)
    assert clone and revs and set(clone) == set(revs), (clone, revs)
    assert PINNED_REV is not None and PINNED_REV.group(1) == revs[0]
    assert revs[0] == f"v{PROJECT['version']}"
    known = tag_known(revs[0])
    if known is None:
        pytest.skip("this checkout carries no tags (a clone of one branch, as CI's); the release is tagged upstream")
    assert known, f"{revs[0]} is not a tag here: `git tag {revs[0]}` the release"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_links() -> list[tuple[Path, str]]:
    found = [(path, target) for path in [*PAGES, ROOT / "CONTRIBUTING.md"] for target in LINK.findall(prose(path))]
    return [(path, target) for path, target in found if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_every_relative_link_of_the_docs_resolves_to_a_file_and_anchor() -> None:
    links = relative_links()
    assert len(links) >= 30, "the pages link each other"
    broken = []
    for path, target in links:
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists() or (anchor and (linked.suffix != ".md" or anchor not in anchors(linked))):
            broken.append(f"{name_of(path)}: {target}")
    assert broken == []


def test_the_readme_links_every_docs_page() -> None:
    """A newcomer reaches every page of the reference from the README."""
    linked = {
        (README.parent / target.partition("#")[0]).resolve() for path, target in relative_links() if path == README
    }
    assert {path.resolve() for path in PAGES[1:]} <= linked


#: a path of the tree quoted in a page's text (placeholders such as ``<event>`` and globs are no path)
TREE_PATH = re.compile(r"`((?:kvlog|tests|benchmarks|scripts|examples|migrations|schemas|formats|docs)/[^`\s<>*{}]+)`")


def test_every_path_of_the_tree_the_docs_name_exists() -> None:
    """A module, script or data file a page names is there: a rename that leaves a page behind fails here."""
    named = {
        (name_of(path), quoted)
        for path in [*PAGES, ROOT / "CONTRIBUTING.md"]
        for quoted in TREE_PATH.findall(path.read_text())
    }
    assert len(named) >= 50
    assert sorted(f"{page}: {quoted}" for page, quoted in named if not (ROOT / quoted.rstrip("/")).exists()) == []
