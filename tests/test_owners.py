"""Each concept the package needs in many places has one owner, and the copies do not come back.

A copy of a rule drifts from its original (one reader forgets that JSON ``true`` is no number); these
tests read the package's source and fail where an inline copy of an owned rule reappears.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlog import commands
from kvlog.check import drafts
from kvlog.cli.integrate import integrate
from kvlog.cli.migrate import migrate
from kvlog.cli.summarize import summarize
from kvlog.integrate import LIVE_SERVERS
from kvlog.io.inputs import STDIN, file_size
from kvlog.io.progress import input_size
from kvlog.io.uris import is_uri
from kvlog.schema import walk
from kvlog.schema.errors import DerefError
from kvlog.schema.readings import json_number

PACKAGE = Path(__file__).resolve().parent.parent / "kvlog"
CORPUS = Path(__file__).parent / "corpus"


def _sources() -> list[tuple[Path, str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    return [(path, path.read_text(encoding="utf-8")) for path in paths if path.name != "events.py"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[(0, True), (-3, True), (1.5, True), (float("inf"), True), (10**400, True)],
        *[(True, False), (False, False), (None, False), ("1", False), ([1], False), ({}, False)],
    ],
)
def test_json_number_is_an_int_or_float_never_a_bool(value: object, expected: bool) -> None:
    assert json_number(value) is expected


def test_no_module_writes_its_own_json_number_test() -> None:
    copy = re.compile(r"isinstance\([^()]*,\s*(int \| float|\(int, float\))\)[^\n]*isinstance\([^()]*,\s*bool\)")
    reverse = re.compile(r"isinstance\([^()]*,\s*bool\)[^\n]*isinstance\([^()]*,\s*(int \| float|\(int, float\))\)")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path, text in _sources()
        if path.name != "readings.py"
        for number, line in enumerate(text.splitlines(), 1)
        if copy.search(line) or reverse.search(line)
    ]
    assert found == [], "use kvlog.schema.readings.json_number"


def test_only_kvlog_io_uris_tells_a_uri_from_a_path() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path, text in _sources()
        if path.name != "uris.py"
        for number, line in enumerate(text.splitlines(), 1)
        if re.search(r"""["']://["'] in \w""", line)
    ]
    assert found == [], "use kvlog.io.uris.is_uri"


@pytest.mark.parametrize(
    ("name", "uri"),
    [("s3://b/k", True), ("file:///var/log/a.log", True), ("logs/a://b", False), ("1x://b", False), ("a.log", False)],
)
def test_a_name_is_a_uri_only_where_it_starts_with_a_scheme(name: str, uri: bool) -> None:
    assert is_uri(name) is uri


def test_an_input_size_is_a_regular_file_s_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b"12345\n")
    assert file_size(str(path)) == 6
    assert [file_size(str(tmp_path)), file_size(str(tmp_path / "missing")), file_size(STDIN)] == [None] * 3
    assert input_size(path.as_uri()) == input_size(str(path)) == 6  # file://: measured as the path it names


@pytest.mark.parametrize("command", [migrate, summarize])
@pytest.mark.parametrize("second_name", ["hard link", "symbolic link", "dotted"])
def test_no_command_writes_over_an_input_under_a_second_name(tmp_path: Path, command: object, second_name: str) -> None:
    log = tmp_path / "server.log"
    shutil.copyfile(CORPUS / "gen2_2025.log", log)
    before = log.read_bytes()
    other = tmp_path / "other.log"
    if second_name == "hard link":
        os.link(log, other)
    elif second_name == "symbolic link":
        other.symlink_to(log)
    else:
        other = tmp_path / "." / "server.log"
    result = CliRunner().invoke(command, [str(log), "-o", str(other)])  # type: ignore[arg-type]
    assert result.exit_code == 2
    assert "is the input" in result.output
    assert log.read_bytes() == before


def test_both_validator_engines_word_a_missing_or_unknown_field_through_one_owner() -> None:
    wordings = ("required field is missing", "unknown field (")
    found = [
        str(path.relative_to(PACKAGE)) for path, text in _sources() if any(wording in text for wording in wordings)
    ]
    assert found == ["schema/event_validator.py"], "use kvlog.schema.event_validator.missing_field / unknown_field"


def test_every_shared_option_is_declared_once_in_the_option_table() -> None:
    shared = ('"--source"', '"--migrations"', '"--engine"', '"--ray-address"', '"--progress/--no-progress"')
    found = [
        f"{path.name}: {flag}"
        for path, text in _sources()
        if path.parent.name == "cli" and path.name != "engine.py"
        for flag in shared
        if flag in text
    ]
    assert found == [], "declare it in kvlog/cli/engine.py and take it from there"


def test_the_draft_reader_takes_where_subschemas_sit_from_the_schema_walk() -> None:
    assert drafts._SINGLE <= walk.SINGLE and drafts._LISTS == walk.LISTS and drafts._MAPS <= walk.MAPS
    text = (PACKAGE / "check" / "drafts.py").read_text(encoding="utf-8")
    assert '"allOf", "anyOf"' not in text  # no table of its own


def test_kvlog_integrate_passes_its_options_by_name_with_the_command_functions_defaults() -> None:
    """The click command forwards nothing by hand: each option is ``commands.integrate``'s keyword, with its default."""
    assert integrate.callback is not None
    taken = [(p.name, p.kind) for p in inspect.signature(integrate.callback).parameters.values()]
    assert taken == [("server", inspect.Parameter.POSITIONAL_OR_KEYWORD), ("options", inspect.Parameter.VAR_KEYWORD)]
    signature = inspect.signature(commands.integrate).parameters
    options = {param.name: param for param in integrate.params}
    assert set(options) == set(signature)
    assert list(options["server"].type.choices) == list(LIVE_SERVERS)  # type: ignore[attr-defined]
    for name, param in options.items():
        if name in ("server", "metrics_port", "keep"):
            continue
        default = param.default if name != "max_held_bytes" else param.default << 20  # --max-held is in MiB
        assert default == signature[name].default, name


def test_one_table_says_which_keywords_each_draft_defines_and_one_function_follows_a_ref() -> None:
    """kvlog.schema.walk owns the drafts' vocabulary and the $ref follower; the draft reader takes both."""
    assert vars(drafts)["walk"] is walk and vars(drafts)["declared"] is walk.declared
    assert vars(drafts)["follow"] is walk.follow
    for path, text in _sources():
        if path.name != "walk.py":
            assert "json-schema.org/draft-0" not in text, f"{path}: tell a draft by kvlog.schema.walk.declared"
            assert ".lookup(" not in text, f"{path}: follow a $ref through kvlog.schema.walk.follow"
            assert '.replace("~1", "/")' not in text, f"{path}: follow a $ref through kvlog.schema.walk.follow"


def test_a_reference_through_a_number_is_a_reference_that_does_not_resolve() -> None:
    from referencing import Registry, Resource  # noqa: PLC0415
    from referencing.jsonschema import DRAFT202012  # noqa: PLC0415

    document = {"$id": "urn:acme", "minimum": 3, "properties": {"a": {"$ref": "#/minimum/x"}}}
    registry = Registry().with_resource("urn:acme", Resource.from_contents(document, default_specification=DRAFT202012))
    with pytest.raises(DerefError, match=r"at properties/a: does not resolve \(TypeError\)"):
        walk.dereference(document, registry, "urn:acme")


def test_kvlog_migrate_passes_its_options_by_name_with_the_command_functions_defaults() -> None:
    """The click command forwards by keyword: each option is ``commands.migrate``'s keyword, with its default."""
    assert migrate.callback is not None
    taken = [(p.name, p.kind) for p in inspect.signature(migrate.callback).parameters.values()]
    assert taken == [
        ("inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("options", inspect.Parameter.VAR_KEYWORD),
    ]
    signature = inspect.signature(commands.migrate).parameters
    passed = migrate.make_context("migrate", ["server.log"]).params  # what click hands the callback
    assert set(passed) - {"progress"} <= set(signature)  # progress: the CLI's reporter wraps it
    for name, value in passed.items():
        if name not in ("inputs", "progress"):
            assert value == signature[name].default, name


PACKAGE = Path(__file__).resolve().parent.parent / "kvlog"


def _exception_classes() -> dict[str, list[str]]:
    """Every exception class kvlog defines, by the module (a path under kvlog/) that defines it.

    Read from the source, not by importing (the extras' modules import Ray, Plotly, torch): a class is
    an exception when a base is a built-in exception or, transitively, another of these classes.
    """
    bases: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                names = [getattr(base, "attr", getattr(base, "id", "")) for base in node.bases]
                bases[f"{path.relative_to(PACKAGE.parent)}:{node.name}"] = (node.name, names)
    known = {name for name, kin in vars(builtins).items() if isinstance(kin, type) and issubclass(kin, BaseException)}
    grew = True
    while grew:
        found = {name for name, parents in bases.values() if any(parent in known for parent in parents)}
        grew = not found <= known
        known |= found
    by_module: dict[str, list[str]] = {}
    for where, (name, parents) in bases.items():
        if any(parent in known for parent in parents):
            by_module.setdefault(where.rsplit(":", 1)[0], []).append(name)
    return by_module


def test_every_exception_a_caller_can_meet_lives_in_its_layers_errors_module() -> None:
    """httpx's ``_exceptions.py``: one place per layer to look up what it raises, and a leaf to import it from.

    A private class (``_Stopped``, ``_Duplicate``) is a module's own control flow that no caller meets.
    """
    classes = _exception_classes()
    assert "kvlog/check/errors.py" in classes and "kvlog/io/errors.py" in classes  # the reader sees them
    astray = {
        module: public
        for module, names in classes.items()
        if Path(module).name not in {"errors.py", "_errors.py"}
        and (public := [name for name in names if not name.startswith("_")])
    }
    assert astray == {}


def test_an_errors_module_loads_none_of_the_extras() -> None:
    """A front end catches the extras' errors (``ClusterError``, ``PlotError``) with the extra not installed."""
    found = PACKAGE.rglob("*errors.py")
    # the memory runtime's package needs torch to import at all (docs/memory.md), so its errors do too
    modules = sorted(
        name
        for path in found
        if (name := ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)) != "kvlog.memory.errors"
    )
    extras = ("ray", "plotly", "prometheus_client", "opentelemetry", "torch", "cuda")
    probe = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({extras!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert len(modules) >= 10
    assert done.stdout.strip() == "[]"
