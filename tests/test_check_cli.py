"""``kvlog check`` on real git repositories holding copies of the catalog.

The rules are run through ``kvlog.commands.check``, in process; real subprocesses remain where the
console is the contract (standard output and error, exit statuses, ``--output``).
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from check_helpers import (
    ACME_V1,
    acme_project,
    acme_rename_migrations,
    acme_schema,
    checked,
    checked_as,
    commit_all,
    git,
    kvlog,
    project_repo,
    read_json,
    write_json,
)

from kvlog.check.evolution import MODES


def edit_reserved_va_bytes_type(repo: Path) -> None:
    path = repo / "schemas" / "kv_arena.ready" / "v2.json"
    schema = read_json(path)
    schema["properties"]["reserved_va_bytes"] = {"type": "number", "minimum": 0, "description": "Bytes reserved."}
    write_json(path, schema)


def test_the_shipped_catalog_passes_every_rule(tmp_path: Path) -> None:
    status, text, summary = checked_as(tmp_path, "text")  # no PATH, no pyproject here: kvlog's own catalog
    assert status == 0, text
    assert "0 errors" in summary


def test_unmodified_repo_passes_against_the_previous_commit(tmp_path: Path) -> None:
    repo = project_repo(tmp_path)
    (repo / "NOTES.md").write_text("unrelated change\n")
    commit_all(repo, "unrelated")
    done = kvlog("check", ".", "--against", "HEAD~1", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("kvlog check: 0 errors, ") and done.stderr.count("\n") == 1


def test_editing_a_released_schema_in_place_fails_naming_the_field(tmp_path: Path) -> None:
    repo = project_repo(tmp_path)
    edit_reserved_va_bytes_type(repo)
    commit_all(repo, "edit a released schema in place")
    status, text, _ = checked_as(repo, "text", ".", against="HEAD~1")
    assert status == 1
    released = [line for line in text.splitlines() if " KV201 " in line]
    assert released == [
        "schemas/kv_arena.ready/v2.json:55: KV201 error: kv_arena.ready@2 was released at HEAD~1 and must not change: "
        'field reserved_va_bytes: type changed from "integer" to "number"; add v3 (with a migration) instead'
    ]
    # The naming rule sees the same edit on its own: a byte count must be an integer.
    assert any(" KV101 " in line and "reserved_va_bytes" in line for line in text.splitlines())

    status, github, _ = checked_as(repo, "github", ".", against="HEAD~1")
    assert status == 1
    assert (
        "::error file=schemas/kv_arena.ready/v2.json,line=55,title=KV201 released-edited::"
        "kv_arena.ready@2 was released at HEAD~1"
    ) in github

    _, findings = checked(repo, ".", against="HEAD~1")
    kv201 = [f for f in findings if f["rule"] == "KV201"]
    assert kv201[0]["file"] == "schemas/kv_arena.ready/v2.json"
    assert kv201[0]["level"] == "error" and kv201[0]["line"] == 55

    report = repo / "kvlog-check.xml"
    junit = kvlog("check", ".", "--against", "HEAD~1", "--format", "junit", "--output", str(report), cwd=repo)
    assert junit.returncode == 1 and junit.stdout == ""
    suite = ElementTree.parse(report).getroot()
    assert suite.get("failures") == "2"
    failing = {case.get("name"): case.find("failure") for case in suite.iter("testcase")}
    assert failing["KV201 released-edited"] is not None
    assert "reserved_va_bytes" in (failing["KV201 released-edited"].text or "")
    assert failing["KV001 schema-unreadable"] is None


def test_rewording_a_released_schema_is_a_warning_only(tmp_path: Path) -> None:
    repo = project_repo(tmp_path)
    path = repo / "schemas" / "kv_arena.ready" / "v2.json"
    schema = read_json(path)
    schema["properties"]["arena_id"]["description"] = "Arena identifier (reworded)."
    write_json(path, schema)
    commit_all(repo, "reword")
    status, text, _ = checked_as(repo, "text", ".", against="HEAD~1")
    assert status == 0
    assert "KV202 warning: kv_arena.ready@2 was released at HEAD~1; its annotations changed: field arena_id" in text


def acme_repo(tmp_path: Path) -> Path:
    root = acme_project(tmp_path / "acme")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "acme.alloc v1")
    return root


def test_a_breaking_rename_fails_alone_and_passes_once_a_migration_covers_it(tmp_path: Path) -> None:
    root = acme_repo(tmp_path)
    renamed = {"reserved_va_bytes": ACME_V1["reserved_bytes"], "pool_state": ACME_V1["pool_state"]}
    write_json(
        root / "telemetry" / "schemas" / "acme.alloc" / "v2.json",
        acme_schema(2, renamed, ["reserved_va_bytes", "pool_state"]),
    )
    commit_all(root, "acme.alloc v2: the reservation is address space")
    status, text, _ = checked_as(root, "text", against="HEAD~1")  # PATH from pyproject's [tool.kvlog]
    assert status == 1
    lines = text.splitlines()
    (breaking,) = [line for line in lines if " KV204 " in line]
    assert breaking == (
        "telemetry/schemas/acme.alloc/v2.json:28: KV204 error: acme.alloc@2 is not backward-compatible with v1 in "
        "compatibility mode backward: $.reserved_bytes: v1 allows reserved_bytes, v2 rejects it "
        "(closed content model); $.reserved_va_bytes: v2 requires reserved_va_bytes; v1 may lack it; "
        "for example this v1 event breaks: "
        '{"event":"acme.alloc","schema_version":1,"timestamp":"","level":"debug","reserved_bytes":0,'
        '"pool_state":"reserved"}; add a migration v1 -> v2'
    )
    assert (
        "telemetry/schemas/acme.alloc/v1.json: KV302 error: acme.alloc@1 cannot be migrated to the latest version v2: "
        "no chain of migrations leads there (e.g. add acme.alloc/v1-to-v2.toml)"
    ) in lines

    acme_rename_migrations(root)
    commit_all(root, "migrations for the rename")
    for mode in MODES:
        status, text, _ = checked_as(root, "text", against="HEAD~2", mode=mode)
        assert status == 0, (mode, text)
        notes = [line for line in text.splitlines() if " KV205 note: " in line]
        assert len(notes) == {"none": 0, "full": 2, "full_transitive": 2}.get(mode, 1), (mode, notes)
    full = checked_as(root, "text", against="HEAD~2", mode="full")[1]
    assert (
        "acme.alloc@2 is not backward-compatible with v1 ($.reserved_bytes: v1 allows reserved_bytes, v2 rejects it "
        "(closed content model); $.reserved_va_bytes: v2 requires reserved_va_bytes; v1 may lack it; for example this "
        'v1 event breaks: {"event":"acme.alloc","schema_version":1,"timestamp":"","level":"debug","reserved_bytes":0,'
        '"pool_state":"reserved"}); covered by migration acme.alloc/v1-to-v2 '
        "(telemetry/migrations/acme.alloc/v1-to-v2.toml)"
    ) in full
    assert "covered by migration acme.alloc/v2-to-v1 (telemetry/migrations/acme.alloc/v2-to-v1.toml)" in full


def test_the_mode_comes_from_pyproject_unless_given(tmp_path: Path) -> None:
    root = acme_repo(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'compatibility = "full"\n')
    # v2 adds an optional field to a closed content model: backward-compatible, not forward.
    write_json(
        root / "telemetry" / "schemas" / "acme.alloc" / "v2.json",
        acme_schema(2, {**ACME_V1, "numa_node": {"type": ["integer", "null"]}}, ["reserved_bytes", "pool_state"]),
    )
    commit_all(root, "acme.alloc v2")
    status, full, _ = checked_as(root, "text", against="HEAD~1")
    assert status == 1
    assert (
        "acme.alloc@2 is not forward-compatible with v1 in compatibility mode full: $.numa_node: v2 allows numa_node, "
        "v1 rejects it (closed content model); for example this v2 event breaks: "
        '{"event":"acme.alloc","schema_version":2,"timestamp":"","level":"debug","reserved_bytes":0,'
        '"pool_state":"reserved","numa_node":0}; add an invertible migration v1 -> v2'
    ) in full
    backward = checked_as(root, "text", against="HEAD~1", mode="backward")[1]
    assert " KV204 " not in backward
    # Still an error: nothing migrates v1 events to v2.
    assert " KV302 error: acme.alloc@1 cannot be migrated to the latest version v2" in backward


def test_a_first_commit_has_nothing_to_compare_with(tmp_path: Path) -> None:
    repo = project_repo(tmp_path)
    done = kvlog("check", ".", "--against", "HEAD~1", cwd=repo)
    assert done.returncode == 2
    assert done.stderr.startswith("kvlog check: --against HEAD~1: not a commit in the repository holding ")
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert checked(repo, ".", against="HEAD")[0] == 0
