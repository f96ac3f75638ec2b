"""JSON that orjson reads but could not check or write faithfully: deep nesting and the text of numbers.

orjson parses up to 1024 levels but writes only 254; it reads an integer beyond 64 bits as the
nearest float; and it writes ``1.0e3`` back as ``1000.0``. Each was a crash or a silent change
(issue 9, items 7 and 19). ``kvlog validate`` must report such a line once and go on; ``kvlog migrate``
must dead-letter a line it cannot write and copy every number it does not change exactly as written.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_harness import kvlog
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlog.io import jsonline
from kvlog.io.errors import LineError

ENVELOPE = '"event":"kv_arena.closed","schema_version":1,"timestamp":"2025-01-01T00:00:00Z","level":"info"'
GOOD = "{" + ENVELOPE + ',"arena_id":"1_0","released_bytes":0}'
V1_READY = (
    '{"event":"kv_arena.ready","schema_version":1,"timestamp":"2026-07-20T10:00:00Z","level":"info",'
    '"arena_id":"0","device":0,"reserved_bytes":RESERVED,"granularity_bytes":2097152EXT}'
)
DEPTHS = [253, 254, 255, 256, 512, 1023, 1024, 1025, 2000]


def nested(depth: int, kind: str) -> str:
    """A JSON value ``depth`` levels deep: arrays, or objects with one key."""
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def deep_lines() -> list[tuple[str, str, int]]:
    """(line, what it is, its depth): events with deep ``ext`` and lines that are no event, at every boundary."""
    lines = []
    for depth in DEPTHS:
        for kind in ("array", "object"):
            # the event object is level 1 and ext level 2: the value under ext brings the line to ``depth``
            lines.append(
                (
                    "{"
                    + ENVELOPE
                    + ',"arena_id":"1_0","released_bytes":0,"ext":{"x":'
                    + nested(depth - 2, kind)
                    + "}}",
                    f"event/{kind}",
                    depth,
                )
            )
            lines.append((nested(depth, kind), f"line/{kind}", depth))
            ready = V1_READY.replace("RESERVED", "1073741824").replace(
                "EXT", ',"ext":{"x":' + nested(depth - 2, kind) + "}"
            )
            lines.append((ready, f"v1-event/{kind}", depth))
    return lines


def expected_findings(what: str, depth: int) -> int:
    """Findings ``kvlog validate`` gives the line: none for a valid event, else exactly one."""
    if what.startswith("event/") and depth <= jsonline.MAX_DEPTH:
        return 0
    return 0 if what.startswith("v1-event/") and depth <= jsonline.MAX_DEPTH else 1


def write_deep_log(path: Path) -> list[tuple[str, str, int]]:
    """The deep lines between good events, padded so that ``--jobs 2`` splits the file into several chunks."""
    lines = deep_lines()
    body = "".join(f"{GOOD}\n{line}\n" for line, _, _ in lines) + f"{GOOD}\n" * 3000
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    return lines


def test_orjson_writes_exactly_max_depth_levels() -> None:
    """The limit kvlog reports is orjson's: a new orjson that writes deeper must change MAX_DEPTH with it."""
    orjson.dumps(orjson.loads(nested(jsonline.MAX_DEPTH, "array")))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(orjson.loads(nested(jsonline.MAX_DEPTH + 1, "array")))


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_every_depth_gets_an_answer_from_the_library(depth: int, kind: str) -> None:
    line = nested(depth, kind).encode()
    try:
        parsed = orjson.loads(line)
    except orjson.JSONDecodeError:
        assert depth > 1024
        return
    found = jsonline.problems(line, parsed)
    if depth <= jsonline.MAX_DEPTH:
        assert found == ()
        assert jsonline.dumps(jsonline.exact(line, parsed)) == line
    else:
        assert [(p.path, p.too_deep) for p in found] == [("$", True)]
        assert "nested deeper than 254 levels" in found[0].message
        with pytest.raises(LineError):
            jsonline.exact(line, parsed)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_validate_reports_each_deep_line_once_and_goes_on(tmp_path: Path, suffix: str) -> None:
    log = tmp_path / f"deep{suffix}"
    lines = write_deep_log(log)
    after = tmp_path / "after.jsonl"
    after.write_text(GOOD + "\n{}\n")
    outputs = []
    for jobs in ("1", "2"):
        result = kvlog("validate", "--jobs", jobs, log.name, after.name, cwd=tmp_path)
        assert result.returncode == 1
        outputs.append(result.stdout)
        reported = result.stdout.decode().splitlines()
        findings: dict[int, list[str]] = {}
        for finding in reported[:-1]:
            assert finding.startswith(f"{log.name}:")
            findings.setdefault(int(finding.split(":")[1]), []).append(finding)
        for index, (_, what, depth) in enumerate(lines):
            got = findings.pop(2 * index + 2, [])  # line 2, 4, 6...: a good event before each
            assert len(got) == expected_findings(what, depth), (what, depth, got)
            if got and depth > 1024 and not what.startswith("line/array"):
                assert "JSON that kvlog cannot read: depth limit exceeded" in got[0]
            elif got and not what.startswith("line/array") and depth > jsonline.MAX_DEPTH:
                assert "nested deeper than 254 levels" in got[0]
        assert findings == {}, "no good event is reported"
        assert reported[-1] == f"{after.name}:2: ?@?: $.event: missing or not a string: every event needs a name"
        problems = sum(expected_findings(what, depth) for _, what, depth in lines) + 1
        assert f", {problems} problems" in result.stderr.decode(), "the input after the deep one is validated too"
    assert outputs[0] == outputs[1], "--jobs changes nothing"


def test_validate_reports_a_deep_object_even_when_skipping_lines_that_are_not_json(tmp_path: Path) -> None:
    """Over 1024 levels orjson gives up: the line is still an object, maybe an event, and never skipped silently."""
    log = tmp_path / "deep.jsonl"
    lines = deep_lines()
    log.write_text("".join(line + "\n" for line, _, _ in lines))
    result = kvlog("validate", "--skip-non-json", log.name, cwd=tmp_path)
    reported = {int(finding.split(":")[1]) for finding in result.stdout.decode().splitlines()}
    for number, (_, what, depth) in enumerate(lines, 1):
        assert (number in reported) == (expected_findings(what, depth) == 1 and not what.startswith("line/array"))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_migrate_dead_letters_each_deep_event_and_copies_every_line(tmp_path: Path, jobs: str) -> None:
    plain, packed = tmp_path / "deep.jsonl", tmp_path / "deep2.jsonl.gz"
    lines = write_deep_log(plain)
    write_deep_log(packed)
    result = kvlog(
        "migrate", "--jobs", jobs, plain.name, packed.name, "-o", "out/", "--dead-letter", "dead.jsonl", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    migrated = {
        index: line
        for index, (line, what, depth) in enumerate(lines)
        if what.startswith("v1-event/") and depth <= jsonline.MAX_DEPTH
    }
    for output in (
        (tmp_path / "out" / plain.name).read_bytes(),
        gzip.decompress((tmp_path / "out" / packed.name).read_bytes()),
    ):
        written = output.decode().splitlines()
        assert written[: 2 * len(lines) : 2] + written[2 * len(lines) :] == [GOOD] * (len(lines) + 3000)
        for index, (line, _, _) in enumerate(lines):
            if index in migrated:  # up to the limit an older event is migrated, its ext intact
                event = orjson.loads(written[2 * index + 1])
                assert event["schema_version"] == 2 and event["ext"] == orjson.loads(line)["ext"]
            else:
                assert written[2 * index + 1] == line, "copied through as it was"
    dead = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    deep_events = [
        2 * i + 2 for i, (_, what, depth) in enumerate(lines) if "event" in what and depth > jsonline.MAX_DEPTH
    ]
    for name in (plain.name, packed.name):
        assert [record["line"] for record in dead if record["file"] == name] == deep_events
    assert all(record["reason"].startswith(("nested deeper than 254", "looks like a JSON event")) for record in dead)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        ["dead.jsonl", plain.name, packed.name, "out", plain.name, packed.name]
    )
    strict = kvlog("migrate", "--strict", "--jobs", jobs, plain.name, packed.name, "-o", "strict/", cwd=tmp_path)
    assert strict.returncode == 1


def test_migrate_writes_v1_events_with_deep_ext_up_to_the_limit(tmp_path: Path) -> None:
    log = tmp_path / "v1.jsonl"
    ext = ',"ext":{"x":' + nested(jsonline.MAX_DEPTH - 2, "object") + "}"
    log.write_text(V1_READY.replace("RESERVED", "1073741824").replace("EXT", ext) + "\n")
    result = kvlog("migrate", log.name, cwd=tmp_path)
    assert result.returncode == 0
    event = orjson.loads(result.stdout)
    assert event["schema_version"] == 2
    assert orjson.dumps(event["ext"]) == ext[len(',"ext":') :].encode()


# -- numbers ----------------------------------------------------------------------------------------

#: number texts orjson would write differently, and some it writes as they are
NUMBER_TEXTS = [
    "1.0e3", "1E3", "1e3", "1E+3", "-0", "-0.0", "0.10", "1.50", "100.0", "1e-7", "2.5E-308", "1.7976931348623157e308",
    "18446744073709551617", "18446744073709551616", "-9223372036854775809", "123456789012345678901234567890",
    "18446744073709551615", "-9223372036854775808", "0", "1.5", "12",
]  # fmt: skip
WIDE = {"18446744073709551617", "18446744073709551616", "-9223372036854775809", "123456789012345678901234567890"}


def v1_with_numbers(reserved: str = "1073741824") -> str:
    ext = ',"ext":{' + ",".join(f'"n{i}":{text}' for i, text in enumerate(NUMBER_TEXTS))
    ext += ',"list":[' + ",".join(NUMBER_TEXTS) + '],"deeper":{"big":18446744073709551617,"e":1.0e3}}'
    return V1_READY.replace("RESERVED", reserved).replace("EXT", ext)


@pytest.mark.parametrize("to", [None, "1"])
def test_migrate_copies_the_text_of_every_number_it_does_not_change(tmp_path: Path, to: str | None) -> None:
    log = tmp_path / "numbers.jsonl"
    log.write_text(
        v1_with_numbers() + "\n" + v1_with_numbers("1.0e9") + "\n" + v1_with_numbers("18446744073709551617") + "\n"
    )
    args = ["migrate", log.name, *(["--to", to] if to else [])]
    result = kvlog(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode().splitlines()
    assert len(out) == 3
    written_ext = '"ext":{' + ",".join(f'"n{i}":{text}' for i, text in enumerate(NUMBER_TEXTS))
    for line in out:
        assert written_ext in line, line
        assert '"list":[' + ",".join(NUMBER_TEXTS) + "]" in line
        assert '"deeper":{"big":18446744073709551617,"e":1.0e3}' in line
    field = "reserved_bytes" if to == "1" else "reserved_va_bytes"
    assert f'"{field}":1073741824' in out[0]
    assert f'"{field}":1.0e9' in out[1]
    assert f'"{field}":18446744073709551617' in out[2]


def test_migrate_copies_numbers_of_a_spaced_line_and_of_current_events(tmp_path: Path) -> None:
    line = v1_with_numbers().replace('":', '": ').replace(",", ", ")  # as Python's json writes it, numbers aside
    current = "{" + ENVELOPE + ',"arena_id":"1_0","released_bytes":0,"ext":{"a":1.0e3,"b":-0,"c":18446744073709551617}}'
    log = tmp_path / "numbers.jsonl"
    log.write_text(line + "\n" + current + "\n")
    result = kvlog("migrate", log.name, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.decode().splitlines()
    assert '"list": [' not in first and '"list":[' + ",".join(NUMBER_TEXTS) + "]" in first
    assert second == current, "a current event is copied as it is"


def test_migrate_text_and_legacy_formats_read_numbers_as_numbers(tmp_path: Path) -> None:
    log = tmp_path / "numbers.jsonl"
    log.write_text(v1_with_numbers("1.0e9") + "\n")
    for output_format in ("text", "legacy"):
        result = kvlog("migrate", "--format", output_format, log.name, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert b"reserved" in result.stdout and b"0.9 GiB" in result.stdout


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_validate_reports_each_integer_beyond_64_bits_with_its_path(tmp_path: Path, jobs: str) -> None:
    log = tmp_path / "numbers.jsonl"
    spaced = json.dumps(orjson.loads(GOOD))[:-1] + ', "ext": {"n": 18446744073709551617}}'
    log.write_text(f"{v1_with_numbers()}\n{GOOD}\n{spaced}\n" + f"{GOOD}\n" * 3000)
    result = kvlog("validate", "--jobs", jobs, log.name, cwd=tmp_path)
    assert result.returncode == 1
    findings = result.stdout.decode().splitlines()
    wide_paths = [f"$.ext.n{i}" for i, text in enumerate(NUMBER_TEXTS) if text in WIDE]
    wide_paths += [f"$.ext.list[{i}]" for i, text in enumerate(NUMBER_TEXTS) if text in WIDE] + ["$.ext.deeper.big"]
    assert [f.split(": ")[2] for f in findings] == [*wide_paths, "$.ext.n"]
    assert all(f.startswith("numbers.jsonl:1: kv_arena.ready@1: ") for f in findings[:-1])
    assert findings[-1].startswith(
        "numbers.jsonl:3: kv_arena.closed@1: $.ext.n: 18446744073709551617 is an integer beyond 64 bits"
    )
    assert "orjson reads 1.8446744073709552e+19" in findings[-1]


def test_validate_a_number_beyond_a_double_is_one_finding(tmp_path: Path) -> None:
    log = tmp_path / "huge.jsonl"
    log.write_text("{" + ENVELOPE + ',"arena_id":"1_0","released_bytes":' + "9" * 400 + "}\n" + GOOD + "\n")
    for args in ([], ["--skip-non-json"], ["--skip-unknown-events"]):
        result = kvlog("validate", *args, log.name, cwd=tmp_path)
        assert result.returncode == 1
        findings = result.stdout.decode().splitlines()
        assert len(findings) == 1
        assert findings[0].startswith("huge.jsonl:1: ?@?: $: JSON that kvlog cannot read: number is infinity")


# -- the library, property-tested --------------------------------------------------------------------

_ints = st.integers(min_value=-(10**30), max_value=10**30).map(str) | st.sampled_from(["-0", "0"])
_floats = st.builds(
    lambda whole, fraction, exponent: f"{whole}{fraction}{exponent}",
    st.sampled_from(["0", "1", "-1", "12", "-0", "123456789"]),
    st.sampled_from(["", ".0", ".10", ".5", ".000", ".25"]),
    st.sampled_from(["", "e3", "E3", "e+3", "E-3", "e0", "e-7", "E+20"]),
).filter(lambda text: any(c in text for c in ".eE"))
_numbers = _ints | _floats
_keys = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
_json_texts = st.recursive(
    _numbers | st.sampled_from(["true", "false", "null", '"s"', '"é"']),
    lambda children: (
        st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
        | st.dictionaries(_keys, children, max_size=4).map(
            lambda items: "{" + ",".join(f'"{k}":{v}' for k, v in items.items()) + "}"
        )
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_json_texts)
def test_exact_then_dumps_gives_back_the_text_of_every_number(text: str) -> None:
    line = text.encode()
    parsed = orjson.loads(line)
    value = jsonline.exact(line, parsed)
    assert jsonline.dumps(value) == line
    assert jsonline.dumps(jsonline.copy(value)) == line
    assert value == json.loads(text), "the values are the standard library's exact reading"


def _exact_integers(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [n for child in value.values() for n in _exact_integers(child)]
    if isinstance(value, list):
        return [n for child in value for n in _exact_integers(child)]
    return [value] if type(value) is int else []


@settings(max_examples=300, deadline=None)
@given(_json_texts)
def test_problems_names_every_integer_beyond_64_bits_and_nothing_else(text: str) -> None:
    line = text.encode()
    wide = [p for p in jsonline.problems(line, orjson.loads(line)) if "beyond 64 bits" in p.message]
    expected = [n for n in _exact_integers(json.loads(text)) if not jsonline.INT_MIN <= n <= jsonline.INT_MAX]
    assert [int(p.message.split()[0]) for p in wide] == expected
