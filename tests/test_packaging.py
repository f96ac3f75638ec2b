"""What a user installs: a core without torch or cuda-python, and a wheel that carries its data files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest
from foundation_samples import FIELDS, sample

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "cuda", "numpy", "triton")
#: two lines of an old sglang log, for the migrate command
OLD_SGLANG_LOG = (
    "[2025-01-15 10:00:00 TP0] KV Cache is allocated. #tokens: 65536, K size: 1.00 GB, V size: 1.00 GB\n"
    "[2025-01-15 10:00:01 TP0] Memory pool end. avail mem=40.00 GB\n"
)

#: Runs in a fresh interpreter where importing torch or cuda fails, as on a machine without them.
PROBE = textwrap.dedent(
    """
    import importlib.abc, json, sys

    HEAVY = {heavy!r}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HEAVY:
                raise ImportError(f"blocked by the test: {{name}}")
            return None

    sys.meta_path.insert(0, Block())
    import kvlog
    from kvlog.cli import main

    results = {{}}
    for args in {invocations!r}:
        try:
            main(args, standalone_mode=False)
            results[" ".join(args)] = 0
        except SystemExit as exc:
            results[" ".join(args)] = exc.code
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    commands = main.list_commands(main.make_context("kvlog", [], resilient_parsing=True))
    print(json.dumps({{"loaded": loaded, "results": results, "commands": commands}}))
    """
)


def _probe(tmp_path: Path, invocations: list[list[str]]) -> dict[str, object]:
    script = PROBE.format(heavy=HEAVY, invocations=invocations)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return out


def test_import_kvlog_and_the_log_commands_load_neither_torch_nor_cuda(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(
        subprocess.run(
            [sys.executable, "-m", "kvlog", "demo", "--format", "json"], capture_output=True, text=True, check=True
        ).stdout
    )
    old = tmp_path / "old.log"
    old.write_text(OLD_SGLANG_LOG)
    invocations = [
        ["validate", str(log)],
        ["validate", "--jobs", "2", str(log)],
        ["schema", "list"],
        ["schema", "show", "kv_pool.allocation@1"],
        ["migrate", "--only-events", "-o", str(tmp_path / "migrated.jsonl"), str(old)],
        ["validate", str(tmp_path / "migrated.jsonl")],
    ]
    probe = _probe(tmp_path, invocations)
    assert probe["loaded"] == []
    assert probe["results"] == {" ".join(args): 0 for args in invocations}


def test_every_log_command_loads_without_torch_or_cuda(tmp_path: Path) -> None:
    """``--help`` of every command except the demo (which runs the memory runtime when torch is there)."""
    commands = _probe(tmp_path, [])["commands"]
    assert isinstance(commands, list)
    assert {"validate", "schema", "migrate", "check"} <= set(commands)
    invocations = [[command, "--help"] for command in commands if command != "demo"]
    probe = _probe(tmp_path, invocations)
    assert probe["loaded"] == []
    assert probe["results"] == {" ".join(args): 0 for args in invocations}


def _tracked(directory: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", directory], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist): every file counts
        return [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / directory).rglob("*")) if p.is_file()]
    return listed.stdout.split()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built once for the module."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        check=True,
        timeout=300,
    )
    (built,) = dist.glob("kvlog-*.whl")
    return built


#: the environment of commands run in the fresh venv: nothing that points back at the checkout
CLEAN_ENVIRONMENT = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel installed as a user installs it; its directory."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=True)
    subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        check=True,
        timeout=300,
        env=CLEAN_ENVIRONMENT,
    )
    return env_dir


@pytest.mark.slow
def test_the_wheel_carries_the_catalog_and_works_in_a_fresh_venv_outside_the_repo(
    tmp_path: Path, wheel: Path, fresh_venv: Path
) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in ("schemas", "migrations"):
        for path in _tracked(data):
            assert f"kvlog/_data/{path}" in names, f"{path} is not in the wheel"
    assert not any(name.startswith(("schemas/", "migrations/", "tests/")) for name in names)

    env_dir, environment = fresh_venv, CLEAN_ENVIRONMENT
    python = env_dir / "bin" / "python"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    kvlog = str(env_dir / "bin" / "kvlog")

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*args], input=stdin, capture_output=True, text=True, cwd=outside, env=environment, timeout=120, check=False
        )

    where = run(
        str(python),
        "-c",
        "import kvlog, kvlog.schema.resources as r; print(kvlog.__file__); print(r.data_dir('schemas'))",
    )
    module, schemas = where.stdout.split()
    assert Path(module).is_relative_to(env_dir), "kvlog must come from the venv, not the checkout"
    assert Path(schemas).is_relative_to(env_dir)

    listing = run(kvlog, "schema", "list")
    assert listing.returncode == 0, listing.stderr
    assert "kv_arena.ready" in listing.stdout

    good = outside / "events.jsonl"
    good.write_text("".join(json.dumps(sample(event, version)) + "\n" for event, version in FIELDS))
    valid = run(kvlog, "validate", str(good))
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert f"{len(FIELDS)} events, 0 invalid" in valid.stderr
    bad = outside / "bad.jsonl"
    bad.write_text(json.dumps({**sample("kv_arena.ready", 2), "schema_version": 7}) + "\n")
    invalid = run(kvlog, "validate", str(bad))
    assert invalid.returncode == 1
    assert invalid.stdout.startswith(f"{bad}:1: kv_arena.ready@7: $.schema_version: unknown version 7 of ")

    old = outside / "old.log"
    old.write_text(OLD_SGLANG_LOG)
    migrated = run(kvlog, "migrate", "--only-events", str(old))
    assert migrated.returncode == 0, migrated.stderr
    assert [json.loads(line)["event"] for line in migrated.stdout.splitlines()] == [
        "kv_pool.allocation",
        "kv_memory.pool_end",
    ]
    revalidated = run(kvlog, "validate", "-", stdin=migrated.stdout)
    assert revalidated.returncode == 0, revalidated.stdout + revalidated.stderr


#: a user's module: (line, the error mypy must give there, or None where the line is correct)
USER_CODE = [
    ("import sys", None),
    ("import kvlog", None),
    ("from kvlog import events", None),
    ('kvlog.configure(output="json", validation="raise", stream=sys.stdout)', None),
    ("kvlog.bind_ranks(tp=0)", None),
    ('kvlog.emit(events.KvArenaClosed(arena_id="1_0", released_bytes=0))', None),
    ('kvlog.emit(events.KvArenaClosed(arena="1_0", released_bytes=0))', 'Unexpected keyword argument "arena"'),
    (
        'kvlog.emit(events.KvArenaClosed(arena_id="1_0", released_bytes="0"))',
        'Argument "released_bytes" to "KvArenaClosed" has incompatible type "str"; expected "int"',
    ),
    (
        'events.KvMemoryPoolEnd(avail_bytes="40 GB")',
        'Argument "avail_bytes" to "KvMemoryPoolEnd" has incompatible type "str"',
    ),
    ('kvlog.configure(outptu="json")', 'Unexpected keyword argument "outptu" for "configure"'),
    ('kvlog.configure(validation="strict")', 'Argument "validation" to "configure" has incompatible type'),
    ('kvlog.emit({"event": "kv_arena.closed"})', 'Argument 1 to "emit" has incompatible type "dict[str, str]"'),
]


@pytest.mark.slow
def test_a_users_code_is_type_checked_against_the_installed_wheel(tmp_path: Path, fresh_venv: Path) -> None:
    """The README's promise: a wrong field name or type is a mypy error at the call site (needs py.typed).

    mypy runs outside the checkout against the fresh venv's site-packages, as in a user's project;
    without the marker it skips kvlog ("missing library stubs or py.typed marker") and passes anything.
    """
    pytest.importorskip("mypy", reason="mypy comes with the dev extra")
    (tmp_path / "app.py").write_text("".join(f"{line}\n" for line, _ in USER_CODE))
    checked = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--hide-error-context"),
            *("--python-executable", str(fresh_venv / "bin" / "python"), "--cache-dir", str(tmp_path / "cache")),
            "app.py",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in CLEAN_ENVIRONMENT.items() if k != "MYPYPATH"},
        timeout=300,
        check=False,
    )
    errors: dict[int, str] = {}
    for line in checked.stdout.splitlines():
        place, _, message = line.partition(": error: ")
        if message:
            number = int(place.split(":")[1])
            errors[number] = errors.get(number, "") + message
    expected = {number: error for number, (_, error) in enumerate(USER_CODE, 1) if error}
    assert sorted(errors) == sorted(expected), checked.stdout + checked.stderr
    for number, error in expected.items():
        assert error in errors[number], f"line {number}: {errors[number]}"


def test_the_torch_extra_brings_what_torch_needs_to_import_cleanly(wheel: Path) -> None:
    """torch warns "Failed to initialize NumPy" at import when numpy is missing, on every kvlog run."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        requirements = [
            line.removeprefix("Requires-Dist: ")
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist: ")
        ]
    torch_extra = {
        requirement.split(">")[0].split(";")[0].strip()
        for requirement in requirements
        if "'torch'" in requirement or '"torch"' in requirement
    }
    assert {"torch", "numpy"} <= torch_extra, requirements
