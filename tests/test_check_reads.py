"""Issue 9, items 9, 16, 17: kvlog check reads only what a pull request cannot turn against it.

A pull request controls every file of the catalog, and git stores symbolic links: a schema, a step
file, a golden log, its expectation file or pyproject.toml can be a link to /dev/zero, a FIFO, a
directory, a huge file or a secret outside the project. Each is refused as a finding naming the file
(or, for pyproject.toml, which says where everything else is, with exit 2), never read, never hung
on. The same holds for the catalog at ``--against REF`` (a link or an oversized blob in git), and a
ref that looks like an option reaches git only as an object id.

The rules run through ``kvlog.commands.check``, in process; a subprocess checks the console's line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from check_helpers import acme_project, checked, checked_as, git, kvlog, read_json, write_json

from kvlog.check.errors import ConfigError
from kvlog.cli.check import check
from kvlog.cli.failing import flags
from kvlog.errors import OptionError

DOCUMENT_BYTES = 8 << 20  # the caps README documents: 8 MiB for a schema, step or expectation file
LOG_BYTES = 256 << 20  # and 256 MiB for a golden log, before and after decompression

SCHEMAS = Path("telemetry/schemas")
MIGRATIONS = Path("telemetry/migrations")
CORPUS = Path("corpus")
SECRET = "hunter2-do-not-echo"


def with_corpus(root: Path) -> Path:
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + 'corpus = "corpus"\n')
    (root / CORPUS).mkdir()
    return root / CORPUS


def secret_outside(root: Path) -> Path:
    outside = root.parent / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.txt"
    secret.write_text(f'{{"$id": "x", "password": "{SECRET}"\n{SECRET}\n')
    return secret


def plant(kind: str, path: Path, root: Path) -> None:
    """Put at ``path`` something that must not be read: a link to a device, a FIFO, a directory, ..."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "link to /dev/urandom":
        path.symlink_to("/dev/urandom")
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "link to a FIFO":
        os.mkfifo(root / "fifo")
        path.symlink_to(root / "fifo")
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge file":
        with path.open("wb") as handle:
            handle.truncate(LOG_BYTES + 1)  # sparse: over every cap, costs no disk
    elif kind == "link outside the project":
        path.symlink_to(secret_outside(root))
    elif kind == "link to a directory outside":
        path.symlink_to(secret_outside(root).parent, target_is_directory=True)
    else:
        raise AssertionError(kind)


KINDS = [
    "link to /dev/zero",
    "link to /dev/urandom",
    "FIFO",
    "link to a FIFO",
    "directory",
    "huge file",
    "link outside the project",
]
REASONS = ("not a regular file", "over the", "outside the project")


def expectation_beside_a_log(root: Path) -> Path:
    corpus = with_corpus(root)
    (corpus / "old.log").write_text("plain text\n")
    return corpus / "old.expected.jsonl"


# (what it is, where it goes, the rule that reports it)
PLACES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("schema", lambda root: root / SCHEMAS / "acme.alloc" / "v2.json", "KV001"),
    ("shared schema", lambda root: root / SCHEMAS / "_units.json", "KV001"),
    ("migration step", lambda root: root / MIGRATIONS / "acme.alloc" / "v1-to-v2.toml", "KV301"),
    ("golden log", lambda root: with_corpus(root) / "old.log", "KV503"),
    ("compressed golden log", lambda root: with_corpus(root) / "old.log.gz", "KV503"),
    ("expectation file", expectation_beside_a_log, "KV503"),
]


def assert_refused(root: Path, rule: str, where: Path) -> None:
    status, findings = checked(root)
    assert status == 1, findings
    mine = [f for f in findings if f["file"] == where.relative_to(root).as_posix()]
    assert [f["rule"] for f in mine] == [rule], findings
    assert any(reason in mine[0]["message"] for reason in REASONS), mine
    assert SECRET not in json.dumps(findings)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("what", "where", "rule"), PLACES, ids=[p[0] for p in PLACES])
def test_a_planted_catalog_file_is_refused_as_a_finding(
    tmp_path: Path, kind: str, what: str, where: Callable[[Path], Path], rule: str
) -> None:
    root = acme_project(tmp_path / "acme")
    path = where(root)
    plant(kind, path, root)
    assert_refused(root, rule, path)


def test_a_link_to_a_directory_outside_is_not_followed(tmp_path: Path) -> None:
    root = acme_project(tmp_path / "acme")
    for rule, path in (("KV001", root / SCHEMAS / "linked"), ("KV301", root / MIGRATIONS / "linked")):
        plant("link to a directory outside", path, root)
        (path.resolve() / "v1-to-v2.toml").write_text(SECRET)
        assert_refused(root, rule, path)
        path.unlink()


def test_links_inside_the_project_are_read(tmp_path: Path) -> None:
    root = acme_project(tmp_path / "acme")
    v1 = root / SCHEMAS / "acme.alloc" / "v1.json"
    (root / "real-v1.json").write_text(v1.read_text())
    v1.unlink()
    v1.symlink_to(root / "real-v1.json")
    assert checked(root) == (0, [])


def test_the_caps_are_the_documented_ones() -> None:
    from kvlog.check import files  # noqa: PLC0415

    assert (files.DOCUMENT_BYTES, files.LOG_BYTES) == (DOCUMENT_BYTES, LOG_BYTES)


@pytest.mark.parametrize("kind", [*KINDS, "link to a directory outside"])
def test_a_planted_pyproject_is_refused_with_exit_2(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "project"
    root.mkdir()
    plant(kind, root / "pyproject.toml", root)
    with pytest.raises(ConfigError) as raised:
        checked(root)
    message = str(raised.value)
    assert message.startswith("pyproject.toml: "), message
    assert any(reason in message for reason in REASONS), message
    assert SECRET not in message


def test_a_planted_pyproject_is_one_line_on_the_console_and_exit_2(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    plant("link outside the project", root / "pyproject.toml", root)
    done = kvlog("check", cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("kvlog check: pyproject.toml: "), done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
    assert SECRET not in done.stdout + done.stderr


def test_a_decompression_bomb_stops_at_the_cap(tmp_path: Path) -> None:
    import gzip  # noqa: PLC0415

    root = acme_project(tmp_path / "acme")
    corpus = with_corpus(root)
    with gzip.open(corpus / "bomb.log.gz", "wb", compresslevel=1) as handle:
        block = b"x" * (1 << 20)
        for _ in range((LOG_BYTES >> 20) + 1):
            handle.write(block)
    assert (corpus / "bomb.log.gz").stat().st_size < LOG_BYTES // 100
    _, findings = checked(root)
    assert [(f["rule"], f["file"]) for f in findings] == [("KV503", "corpus/bomb.log.gz")], findings
    assert "decompresses to more than" in findings[0]["message"]


# --- item 16: [tool.kvlog] paths stay in the project -------------------------------------------


@pytest.mark.parametrize("key", ["schemas", "migrations", "corpus"])
@pytest.mark.parametrize("form", ["parent", "absolute", "link"])
def test_tool_kvlog_paths_outside_the_project_are_refused(tmp_path: Path, key: str, form: str) -> None:
    root = acme_project(tmp_path / "acme")
    outside = tmp_path / "elsewhere"
    (outside / "schemas").mkdir(parents=True)
    (outside / "schemas" / "x.json").write_text(SECRET)
    value = {"parent": "../elsewhere/schemas", "absolute": str(outside / "schemas"), "link": "inside"}[form]
    if form == "link":
        (root / "inside").symlink_to(outside / "schemas", target_is_directory=True)
    table = {"schemas": "telemetry/schemas", "migrations": "telemetry/migrations", key: value}
    (root / "pyproject.toml").write_text("[tool.kvlog]\n" + "".join(f'{k} = "{v}"\n' for k, v in table.items()))
    with pytest.raises(ConfigError) as raised:
        checked(root)
    message = str(raised.value)
    assert f"[tool.kvlog] {key} = " in message and "is outside the project" in message, message
    assert SECRET not in message


def test_a_directory_given_on_the_command_line_is_read_wherever_it_is(tmp_path: Path) -> None:
    root = acme_project(tmp_path / "acme")
    corpus = tmp_path / "shared-corpus"
    corpus.mkdir()
    (corpus / "old.log").write_text("plain text\n")
    status, text, summary = checked_as(root, "text", corpus=str(corpus))
    assert status == 0, text
    assert "1 corpus file" in summary
    elsewhere = acme_project(tmp_path / "elsewhere")
    assert checked(root, str(elsewhere)) == (0, [])


# --- --against: what git holds is screened the same way ------------------------------------------


def committed_project(tmp_path: Path) -> Path:
    root = acme_project(tmp_path / "acme")
    git(root, "init", "-q", "-b", "main")
    return root


def commit(root: Path, *paths: str) -> None:
    git(root, "add", "--", *paths)
    git(root, "commit", "-q", "-m", "state")


@pytest.mark.parametrize("blob", ["link to /dev/zero", "link outside the project", "oversized blob"])
def test_a_link_or_an_oversized_blob_at_the_ref_is_refused(tmp_path: Path, blob: str) -> None:
    root = committed_project(tmp_path)
    planted = root / SCHEMAS / "_planted.json"
    if blob == "oversized blob":
        planted.write_bytes(b" " * (DOCUMENT_BYTES + 1))
    else:
        plant(blob, planted, root)
    commit(root, "pyproject.toml", "telemetry")
    planted.unlink()
    _, findings = checked(root, against="HEAD")
    assert [(f["rule"], f["file"]) for f in findings] == [("KV001", "HEAD:telemetry/schemas/_planted.json")], findings
    assert ("symbolic link" in findings[0]["message"]) == (blob != "oversized blob")
    assert SECRET not in json.dumps(findings)


# --- item 17: a ref that looks like an option -----------------------------------------------------


@pytest.mark.parametrize("branch", ["-r", "--format=%(objectname)", "--output=planted.txt", "-z"])
def test_a_branch_named_like_an_option_is_used_as_a_ref(tmp_path: Path, branch: str) -> None:
    root = committed_project(tmp_path)
    commit(root, "pyproject.toml", "telemetry")
    git(root, "update-ref", f"refs/heads/{branch}", "HEAD")
    v1 = root / SCHEMAS / "acme.alloc" / "v1.json"
    schema = read_json(v1)
    schema["properties"]["pool_state"]["enum"].append("evicted")
    write_json(v1, schema)
    status, text, _ = checked_as(root, "text", against=branch)
    assert status == 1, text
    assert f"KV201 error: acme.alloc@1 was released at {branch} and must not change" in text
    assert not (root / "planted.txt").exists()


@pytest.mark.parametrize("ref", ["--help", "-r", "--all", "--output=planted.txt"])
def test_an_option_that_names_no_branch_is_no_commit(tmp_path: Path, ref: str) -> None:
    root = committed_project(tmp_path)
    commit(root, "pyproject.toml", "telemetry")
    with pytest.raises(OptionError) as raised:
        checked(root, against=ref)
    assert raised.value.worded(flags(check)).startswith(f"--against {ref}: not a commit"), raised.value
    assert not (root / "planted.txt").exists()


@pytest.mark.parametrize("part", ["schemas", "migrations", "tests/corpus"])
def test_a_catalog_directory_linked_out_of_the_path_is_refused(tmp_path: Path, part: str) -> None:
    project = tmp_path / "project"
    (project / "schemas").mkdir(parents=True)
    outside = secret_outside(project).parent
    (project / part).parent.mkdir(parents=True, exist_ok=True)
    if part == "schemas":
        (project / "schemas").rmdir()
    (project / part).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError) as raised:
        checked(tmp_path, "project")
    assert str(raised.value).startswith(f"project/{part}: a link out of project"), raised.value
    assert SECRET not in str(raised.value)
