"""Broken input gets a clear finding or error naming the file (and line), never a traceback.

Each case breaks one thing in a user's project that ``kvlog check`` otherwise passes, and runs the
real command on it (``kvlog`` in check_helpers asserts that stderr holds no traceback).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from check_helpers import (
    ACME_V1,
    acme_event,
    acme_project,
    acme_rename_migrations,
    acme_schema,
    kvlog,
    read_json,
    write_json,
)

SCHEMAS = Path("telemetry/schemas")
V1 = SCHEMAS / "acme.alloc" / "v1.json"


def edit_v1(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        schema = read_json(root / V1)
        change(schema)
        write_json(root / V1, schema)

    return apply


def write(relative: str, text: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)

    return apply


def add_v2_and_migrations(root: Path) -> None:
    renamed = {"reserved_va_bytes": ACME_V1["reserved_bytes"], "pool_state": ACME_V1["pool_state"]}
    write_json(root / SCHEMAS / "acme.alloc" / "v2.json", acme_schema(2, renamed, ["reserved_va_bytes", "pool_state"]))
    acme_rename_migrations(root)


def lossy_way_back(root: Path) -> None:
    add_v2_and_migrations(root)
    path = root / "telemetry/migrations/acme.alloc/v2-to-v1.toml"
    path.write_text(
        path.read_text().replace(
            "[[examples]]", '[[ops]]\nop = "set"\nfield = "pool_state"\nvalue = "backed"\n\n[[examples]]'
        )
    )


def wrong_example(root: Path) -> None:
    add_v2_and_migrations(root)
    path = root / "telemetry/migrations/acme.alloc/v1-to-v2.toml"
    path.write_text(path.read_text().replace('"reserved_va_bytes": 4096', '"reserved_va_bytes": 4097'))


def invalid_example(root: Path) -> None:
    """A migration example whose input is not a valid event of its version; the step carries it to the output."""
    add_v2_and_migrations(root)
    path = root / "telemetry/migrations/acme.alloc/v1-to-v2.toml"
    path.write_text(path.read_text().replace('"pool_state": "reserved"', '"pool_state": "leased"'))


def _set(path: list[str], value: object) -> Callable[[dict], None]:
    def change(schema: dict) -> None:
        node = schema
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


# (case, how to break the project, exit status, expected output fragment: file:line: RULE level: message)
CASES: list[tuple[str, Callable[[Path], None], int, str]] = [
    ("invalid JSON", write(str(V1), '{"$id": "x",\n  "type": object\n}\n'), 1, f"{V1}:2: KV001 error: invalid JSON: "),
    (
        "a schema that cannot be read",
        lambda root: (root / SCHEMAS / "acme.alloc" / "v2.json").mkdir(),
        1,
        f"{SCHEMAS}/acme.alloc/v2.json: KV001 error: not a regular file (a directory)",
    ),
    ("not an object", write(str(V1), "[1, 2]\n"), 1, f"{V1}:1: KV001 error: a schema must be a JSON object"),
    (
        "dangling $ref",
        edit_v1(_set(["properties", "reserved_bytes"], {"$ref": "../_common.json#/$defs/byte"})),
        1,
        f"{V1}:29: KV003 error: $ref '../_common.json#/$defs/byte' at properties/reserved_bytes: does not resolve",
    ),
    (
        "recursive $ref",
        edit_v1(_set(["properties", "reserved_bytes"], {"$ref": "#/properties/reserved_bytes"})),
        1,
        "KV003 error: $ref '#/properties/reserved_bytes' at properties/reserved_bytes: is recursive",
    ),
    (
        "not Draft 2020-12",
        edit_v1(_set(["properties", "pool_state"], {"type": "strng"})),
        1,
        f"{V1}:32: KV002 error: not a valid Draft 2020-12 schema at properties/pool_state/type: 'strng' is not valid",
    ),
    (
        "$id disagrees with the file",
        edit_v1(_set(["$id"], "https://acme.example/telemetry/acme.alloc/v7.json")),
        1,
        "KV004 error: $id is 'https://acme.example/telemetry/acme.alloc/v7.json' but this file's place in the "
        "catalog is 'https://acme.example/telemetry/acme.alloc/v1.json'",
    ),
    (
        "schema_version disagrees with the file name",
        edit_v1(_set(["properties", "schema_version", "const"], 2)),
        1,
        f"{V1}:10: KV005 error: properties.schema_version.const is 2; the file name says 1",
    ),
    (
        "a missing version",
        lambda root: write_json(
            root / SCHEMAS / "acme.alloc" / "v3.json", acme_schema(3, ACME_V1, ["reserved_bytes", "pool_state"])
        ),
        1,
        f"{SCHEMAS}/acme.alloc/v3.json:1: KV006 error: acme.alloc: missing v2.json (versions run 1, 2, ...)",
    ),
    (
        "a file outside the layout",
        write(f"{SCHEMAS}/acme.alloc/version2.json", "{}"),
        1,
        f"{SCHEMAS}/acme.alloc/version2.json: KV007 error: not part of the catalog layout",
    ),
    (
        "a size in GiB",
        edit_v1(_set(["properties", "reserved_gib"], {"type": "number"})),
        1,
        "KV102 error: reserved_gib (properties/reserved_gib): sizes are integer bytes; "
        "name it *_bytes, not reserved_gib",
    ),
    (
        "a float byte count",
        edit_v1(_set(["properties", "reserved_bytes"], {"type": "number", "minimum": 0})),
        1,
        "KV101 error: reserved_bytes (properties/reserved_bytes) must be a non-negative integer (or null): its type is",
    ),
    (
        "a byte count not named *_bytes",
        edit_v1(_set(["properties", "reserved"], {"$ref": "../_common.json#/$defs/bytes"})),
        1,
        "KV103 error: reserved (properties/reserved) is a byte count ($defs/bytes); name it *_bytes",
    ),
    (
        "a state without an enum (a warning only)",
        edit_v1(_set(["properties", "pool_state"], {"type": "string"})),
        0,
        "KV104 warning: pool_state (properties/pool_state) is a state field; declare its values with enum",
    ),
    (
        "a migration pointing nowhere",
        write(
            "telemetry/migrations/acme.alloc/v1-to-v9.toml",
            'event = "acme.alloc"\nfrom_version = 1\nto_version = 9\ninvertible = false\n'
            f"[[examples]]\ninput = '{acme_event(1)}'\noutput = '{acme_event(9)}'\n",
        ),
        1,
        "telemetry/migrations/acme.alloc/v1-to-v9.toml: KV301 error: unknown version 9 of event 'acme.alloc'",
    ),
    (
        "a migration that is not TOML",
        write("telemetry/migrations/acme.alloc/v1-to-v2.toml", "event = acme.alloc\n"),
        1,
        "telemetry/migrations/acme.alloc/v1-to-v2.toml: KV301 error: invalid TOML: ",
    ),
    (
        "an example that does not hold",
        wrong_example,
        1,
        "telemetry/migrations/acme.alloc/v1-to-v2.toml:11: KV401 error: acme.alloc/v1-to-v2 example 1 does not give "
        "its declared output: reserved_va_bytes: expected 4097, got 4096",
    ),
    (
        "an example whose input and output are not valid events",
        invalid_example,
        1,
        "telemetry/migrations/acme.alloc/v1-to-v2.toml:11: KV403 error: acme.alloc/v1-to-v2 example 1 input is not a "
        'valid acme.alloc@1 event: $.pool_state: "leased" is not one of "reserved" or "backed"\n'
        "telemetry/migrations/acme.alloc/v1-to-v2.toml:11: KV403 error: acme.alloc/v1-to-v2 example 1 output is not "
        'a valid acme.alloc@2 event: $.pool_state: "leased" is not one of "reserved" or "backed"\n',
    ),
    (
        "an invertible step that loses data",
        lossy_way_back,
        1,
        "telemetry/migrations/acme.alloc/v1-to-v2.toml:11: KV402 error: acme.alloc/v1-to-v2 example 1: "
        "acme.alloc/v1-to-v2 "
        'is declared invertible, but the round trip changes it: pool_state: expected "reserved", got "backed"',
    ),
]


def test_the_unbroken_project_passes(tmp_path: Path) -> None:
    root = acme_project(tmp_path / "acme")
    done = kvlog("check", cwd=root)
    assert (done.returncode, done.stdout) == (0, "")
    add_v2_and_migrations(root)
    done = kvlog("check", cwd=root)
    assert (done.returncode, done.stdout) == (0, ""), done.stdout


@pytest.mark.parametrize(("case", "breakage", "status", "expected"), CASES, ids=[c[0] for c in CASES])
def test_broken_input_is_named(
    tmp_path: Path, case: str, breakage: Callable[[Path], None], status: int, expected: str
) -> None:
    root = acme_project(tmp_path / "acme")
    breakage(root)
    done = kvlog("check", cwd=root)
    assert done.returncode == status, done.stdout + done.stderr
    assert expected in done.stdout, done.stdout
    as_json = kvlog("check", "--format", "json", cwd=root)
    findings = json.loads(as_json.stdout)
    assert all(f["file"] is None or (root / f["file"]).exists() for f in findings)


@pytest.mark.parametrize(
    ("args", "setup", "message"),
    [
        (["check", "nowhere"], None, "kvlog check: nowhere: not a directory"),
        (["check", "."], None, "kvlog check: .: holds neither schemas/ nor a pyproject.toml with a [tool.kvlog] table"),
        (["check", "--against", "HEAD~1"], "acme", "kvlog check: "),
        (["check"], "bad-pyproject", "kvlog check: pyproject.toml: cannot read: "),
        (["check"], "bad-table", "kvlog check: pyproject.toml: [tool.kvlog] schemas = 'missing' is not a directory"),
        (["check", "--output", "no/such/dir/report.xml"], "acme", "kvlog check: cannot write no/such/dir/report.xml"),
        (
            ["check"],
            "bad-mode",
            "kvlog check: pyproject.toml: [tool.kvlog] compatibility = 'strict': expected one of backward, ",
        ),
    ],
    ids=[
        "no such path",
        "not a catalog",
        "not a git repository",
        "pyproject not TOML",
        "schemas not there",
        "output",
        "unknown mode",
    ],
)
def test_unusable_input_exits_2_with_one_clear_line(
    tmp_path: Path, args: list[str], setup: str | None, message: str
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    if setup == "acme":
        acme_project(root)
    elif setup == "bad-pyproject":
        (root / "pyproject.toml").write_text("[tool.kvlog\n")
    elif setup == "bad-mode":
        acme_project(root)
        (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + 'compatibility = "strict"\n')
    elif setup == "bad-table":
        (root / "pyproject.toml").write_text('[tool.kvlog]\nschemas = "missing"\n')
    done = kvlog(*args, cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_signed_byte_difference_is_allowed_once_declared(tmp_path: Path) -> None:
    root = acme_project(tmp_path / "acme")
    measured = {"type": ["integer", "null"], "description": "Drop in RSS, as measured: may be negative."}
    edit_v1(_set(["properties", "measured_freed_bytes"], measured))(root)
    done = kvlog("check", cwd=root)
    assert done.returncode == 1
    assert (
        "KV101 error: measured_freed_bytes (properties/measured_freed_bytes) must be a non-negative integer (or null): "
        'it has no minimum of 0 (a signed difference says so: "x-kvlog-signed": true)'
    ) in done.stdout
    edit_v1(_set(["properties", "measured_freed_bytes"], {**measured, "x-kvlog-signed": True}))(root)
    edit_v1(_set(["properties", "discrepancy_bytes"], {"type": "integer"}))(root)  # signed by its name
    done = kvlog("check", cwd=root)
    assert (done.returncode, done.stdout) == (0, "")
    edit_v1(_set(["properties", "measured_freed_bytes"], {"type": "number", "x-kvlog-signed": True}))(root)
    done = kvlog("check", cwd=root)
    assert (
        "KV101 error: measured_freed_bytes (properties/measured_freed_bytes) must be an integer (or null)"
        in done.stdout
    )
