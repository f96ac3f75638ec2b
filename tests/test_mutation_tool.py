"""scripts/mutation, run for real on a tiny project: each status is earned the way the tool promises.

The tiny project has a module whose mutants are caught, missed at an untested edge, seen only by a test
that runs the code in a subprocess, killed only through the whole selection (a module constant, imported
first by another test), killed only by a later user of a shared fixture, stuck in an endless loop, or run
only in a child the test forks (which coverage never hears from); a second module has a function no test
calls. The tool runs once on it (module fixture); the error paths each run it on their own copy.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "scripts" / "mutation"

CORE = '''\
"""The module under mutation: its docstring says 1 < 2, which is no behaviour."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    WIDTH = 80

__all__ = ["LIMIT", "clamp", "count_up", "is_adult", "shout"]

LIMIT = 10
Bound = int | None


class Span:
    start: int


def clamp(x: int, low: int, high: int) -> int:
    """Clamp x into [low, high]; 1 < 2."""
    if x > high:
        return high
    return max(x, low)


def is_adult(age: int) -> bool:
    return age >= 18


def count_up(n: int) -> int:
    i = 0
    while i < n:
        i += 1
    return i


def shout(text: str) -> str:
    return text.upper() + "!"


def width(base: int) -> int:
    return base + 4


def twice(x: int) -> int:
    return x * 2
'''

EXTRA = """\
from typing import Literal


def negate(x: int) -> int:
    return -x


def never_called(mode: Literal[3]) -> bool:
    return True
"""

TEST_CORE = """\
import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def measured() -> int:
    from tinypkg.core import width

    return width(3)


def test_first_imports_the_module() -> None:
    from tinypkg import core

    assert core.clamp(5, 0, 9) == 5


def test_clamp() -> None:
    from tinypkg.core import clamp

    assert clamp(20, 0, 9) == 9
    assert clamp(-3, 0, 9) == 0


def test_is_adult_far_from_the_edge() -> None:
    from tinypkg.core import is_adult

    assert is_adult(30)
    assert not is_adult(5)


def test_count_up() -> None:
    from tinypkg.core import count_up

    assert count_up(3) == 3


def test_limit() -> None:
    from tinypkg.core import LIMIT

    assert LIMIT == 10


def test_a_shared_fixture_is_set_up(measured: int) -> None:
    assert measured


def test_the_shared_fixture_value(measured: int) -> None:
    assert measured == 7


def test_shout_on_the_console() -> None:
    code = "from tinypkg.core import shout; print(shout('hi'))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "HI!\\n"


def test_twice_in_a_forked_child() -> None:
    from tinypkg.core import twice

    pid = os.fork()
    if pid == 0:
        os._exit(0 if twice(4) == 8 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
"""

TEST_EXTRA = """\
from tinypkg.extra import negate


def test_negate() -> None:
    assert negate(2) == -2
"""

CONFIG = """\
[settings]
timeout_min = 5

[modules."tinypkg/core.py"]
tests = ["tests/test_core.py"]

[modules."tinypkg/extra.py"]
tests = ["tests/test_extra.py"]

[[equivalent]]
key = "tinypkg/core.py::clamp::> -> >=::if x > high:::1"
reason = "at x == high both branches return high"

[[equivalent]]
key = "tinypkg/core.py::clamp::> -> >=::if x > top:::1"
reason = "a line that was renamed since"
"""


def write_tiny_project(root: Path) -> Path:
    files = {
        "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
        "tinypkg/__init__.py": "",
        "tinypkg/core.py": CORE,
        "tinypkg/extra.py": EXTRA,
        "tests/test_core.py": TEST_CORE,
        "tests/test_extra.py": TEST_EXTRA,
        "scripts/mutation.toml": CONFIG,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def run_tool(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TOOL), *arguments], capture_output=True, text=True, timeout=600, check=False)


def mutant_keys(progress: str) -> list[str]:
    """The key of each mutant a progress line reports."""
    return re.findall(r"(tinypkg/\S+\.py::.*?::\d+)(?: \(|$)", progress, flags=re.M)


@dataclass(frozen=True)
class Run:
    result: subprocess.CompletedProcess[str]
    markdown: str
    command: list[str]

    def status(self, key: str) -> str:
        """The status the progress line of ``key`` gave it."""
        for line in self.result.stderr.splitlines():
            if line.startswith("[") and (line.endswith(f" {key}") or f" {key} (" in line):
                return line.split()[2]
        raise AssertionError(f"no progress line for {key}:\n{self.result.stderr}")

    def mutant_keys(self) -> list[str]:
        return mutant_keys(self.result.stderr)

    def row(self, module: str) -> list[str]:
        return next(line.split() for line in self.result.stdout.splitlines() if line.startswith(module))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = write_tiny_project(tmp_path_factory.mktemp("tiny"))
    markdown = root / "scores.md"
    command = [str(TOOL), "--root", str(root), "--jobs", "2", "--markdown", str(markdown)]
    result = run_tool(*command[1:])
    assert result.returncode == 0, result.stderr
    return Run(result, markdown.read_text(), command)


def test_a_mutant_a_test_catches_is_killed(tiny_run: Run) -> None:
    assert tiny_run.status("tinypkg/core.py::clamp::return -> return None::return high::1") == "killed"


def test_an_untested_edge_survives_and_is_printed_with_its_edit(tiny_run: Run) -> None:
    key = "tinypkg/core.py::is_adult::>= -> >::return age >= 18::1"
    assert tiny_run.status(key) == "survived"
    assert f"{key}\n  - return age >= 18\n  + return age > 18\n" in tiny_run.result.stdout


def test_a_line_no_test_runs_survives_without_being_run(tiny_run: Run) -> None:
    key = "tinypkg/extra.py::never_called::True -> False::return True::1"
    assert tiny_run.status(key) == "survived"
    assert f"{key}  (no test reaches it)\n  - return True\n  + return False" in tiny_run.result.stdout


def test_an_endless_loop_is_stopped_as_a_timeout_and_counts_as_killed(tiny_run: Run) -> None:
    assert tiny_run.status("tinypkg/core.py::count_up::+= -> -=::i += 1::1") == "timeout"


def test_a_mutant_only_a_subprocess_test_can_see_is_killed(tiny_run: Run) -> None:
    assert tiny_run.status('tinypkg/core.py::shout::return -> return None::return text.upper() + "!"::1') == "killed"


def test_a_mutant_only_a_forked_child_runs_is_killed(tiny_run: Run) -> None:
    # coverage never hears from a child that leaves by os._exit: the test that forks runs every mutant
    for edit in ("* -> /", "2 -> 3", "2 -> 1", "return -> return None"):
        assert tiny_run.status(f"tinypkg/core.py::twice::{edit}::return x * 2::1") == "killed", edit


def test_a_module_constant_is_killed_by_a_test_that_did_not_import_the_module_first(tiny_run: Run) -> None:
    # test_first_imports_the_module runs the line LIMIT = 10; only test_limit can tell 11 from 10
    assert tiny_run.status("tinypkg/core.py::<module>::10 -> 11::LIMIT = 10::1") == "killed"


def test_a_line_a_shared_fixture_runs_is_killed_by_a_test_that_did_not_set_the_fixture_up(tiny_run: Run) -> None:
    # the module-scoped fixture runs width(3) during the first test that uses it, which only checks truth
    assert tiny_run.status("tinypkg/core.py::width::+ -> -::return base + 4::1") == "killed"


def test_a_listed_equivalent_is_neither_run_nor_counted(tiny_run: Run) -> None:
    assert tiny_run.status("tinypkg/core.py::clamp::> -> >=::if x > high:::1") == "equivalent"
    assert tiny_run.row("tinypkg/core.py")[5] == "1"


def test_the_score_is_killed_and_timeouts_over_all_mutants_but_the_equivalent_ones(tiny_run: Run) -> None:
    for module in ("tinypkg/core.py", "tinypkg/extra.py"):
        statuses = [tiny_run.status(key) for key in tiny_run.mutant_keys() if key.startswith(module)]
        counts = [statuses.count(status) for status in ("killed", "timeout", "survived", "equivalent")]
        score = 100 * (counts[0] + counts[1]) / (len(statuses) - counts[3])
        assert tiny_run.row(module) == [module, str(len(statuses)), *map(str, counts), f"{score:.1f}%"]
    assert tiny_run.row("tinypkg/extra.py")[1:] == ["3", "1", "0", "2", "0", "33.3%"]


def test_the_markdown_table_names_the_date_and_the_exact_command(tiny_run: Run) -> None:
    first = tiny_run.markdown.splitlines()[0]
    assert re.fullmatch(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC with `(.*)`:", first)
    assert first.split("`")[1] == " ".join(tiny_run.command)
    assert "| module | mutants | killed | timeout | survived | equivalent | score |" in tiny_run.markdown
    assert "| `tinypkg/extra.py` | 3 | 1 | 0 | 2 | 0 | 33.3% |" in tiny_run.markdown
    assert "at x == high both branches return high" in tiny_run.markdown


def test_only_behaviour_is_mutated(tiny_run: Run) -> None:
    keys = tiny_run.mutant_keys()
    assert keys
    never = ("1 < 2", "WIDTH", "__all__", "import", "Literal[3]", "-> int", "age: int", "Bound", "start: int")
    assert [key for key in keys if any(text in key for text in never)] == []


def test_an_equivalent_entry_that_matches_no_mutant_is_warned_about(tiny_run: Run) -> None:
    assert (
        "warning: [[equivalent]] tinypkg/core.py::clamp::> -> >=::if x > top:::1 matches no mutant (the line changed?)"
        in tiny_run.result.stderr
    )


def test_a_sample_is_the_same_on_every_run_with_the_same_seed(tmp_path: Path) -> None:
    root = write_tiny_project(tmp_path)
    runs = [run_tool("--root", str(root), "tinypkg/extra.py", "--sample", "2", "--seed", "7") for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0]
    progress = [sorted(mutant_keys(run.stderr)) for run in runs]
    assert len(progress[0]) == 2
    assert progress[0] == progress[1]
    assert next(line for line in runs[0].stdout.splitlines() if line.startswith("tinypkg/extra.py")).split()[1] == "2"


def test_a_failing_baseline_stops_the_run_and_names_the_failing_tests(tmp_path: Path) -> None:
    root = write_tiny_project(tmp_path)
    (root / "tests" / "test_extra.py").write_text(TEST_EXTRA + "\n\ndef test_wrong() -> None:\n    assert False\n")
    result = run_tool("--root", str(root), "tinypkg/extra.py")
    assert result.returncode == 1
    assert "baseline failed" in result.stderr
    assert "tests/test_extra.py::test_wrong" in result.stderr
    assert "test_negate" not in result.stderr
    assert "[1/" not in result.stderr


def test_a_module_out_of_scope_is_a_usage_error_naming_the_modules_in_scope(tmp_path: Path) -> None:
    root = write_tiny_project(tmp_path)
    result = run_tool("--root", str(root), "tinypkg/__init__.py")
    assert result.returncode == 2
    assert "tinypkg/__init__.py is not in scope" in result.stderr
    assert "tinypkg/core.py" in result.stderr
    assert "tinypkg/extra.py" in result.stderr


def test_changed_with_no_module_changed_mutates_nothing(tmp_path: Path) -> None:
    root = write_tiny_project(tmp_path)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "pyproject.toml", "tinypkg", "tests", "scripts"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tiny"], check=True)
    (root / "tests" / "test_extra.py").write_text(TEST_EXTRA + "\n")  # a test changed, no module in scope
    result = run_tool("--root", str(root), "--changed", "HEAD")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no module in scope differs from HEAD: nothing to mutate\n"
    assert "baseline" not in result.stderr


def test_testing_md_lists_every_mutant_the_configuration_judges_equivalent() -> None:
    """TESTING.md's list is the tool's own, from scripts/mutation.toml, so a judgement has one owner."""
    listed = subprocess.run([str(TOOL), "--equivalents"], capture_output=True, text=True, check=True).stdout
    assert listed.count("### `kvlog/") >= 5 and "`: " in listed
    text = (TOOL.parents[1] / "TESTING.md").read_text()
    section = text.split("<!-- equivalents: start -->\n", 1)[1].split("<!-- equivalents: end -->", 1)[0]
    assert section.strip() == listed.strip(), "paste `scripts/mutation --equivalents` between the markers"
