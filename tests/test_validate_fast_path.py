"""``kvlog validate``'s fast paths report what the exact paths report.

The hot loop settles a line by one test, "is it what orjson writes for the value it read?", and reads
the line again (keeping every key) only when it is not; files are split into lines a block at a time
instead of one ``readline`` a line. Both are only worth having if no duplicate key, no line and no
line number is ever lost to them: these properties check that on arbitrary JSON, nested objects and
strings made to look like keys (``\\":``, escaped quotes and backslashes) included.
"""

from __future__ import annotations

import io
import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlog.file_validation import Counts, validate_lines
from kvlog.io import inputs
from kvlog.io.inputs import OverlongLine, bounded_lines, range_lines
from kvlog.schema.event_validator import EventValidator

#: keys that collide often, and strings that hold what a key looks like in the text
_KEYS = st.sampled_from(["a", "b", "ext", 'a":', '\\":', '"', "\\", 'x":{"a":1}', "\u00e9", "a "])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), _KEYS, st.text(max_size=5))


def _object_text(pairs: list[tuple[str, str]], spaced: bool) -> str:
    colon, comma = (" : ", " , ") if spaced else (":", ",")
    return "{" + comma.join(json.dumps(key, ensure_ascii=False) + colon + value for key, value in pairs) + "}"


def _json_texts() -> st.SearchStrategy[str]:
    """JSON values as text; objects may repeat a key at any depth, compactly written or spaced."""
    scalars = _SCALARS.map(lambda value: json.dumps(value, ensure_ascii=False))
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
            st.builds(_object_text, st.lists(st.tuples(_KEYS, children), max_size=4), st.booleans()),
        ),
        max_leaves=12,
    )


def _has_duplicate(text: str) -> bool:
    """The exact reading: the standard library, shown every key."""
    found = False

    def pairs_hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal found
        keys = [key for key, _ in pairs]
        found = found or len(set(keys)) != len(keys)
        return dict(pairs)

    json.loads(text, object_pairs_hook=pairs_hook)
    return found


def _event_line(ext: str, top_duplicate: bool, spaced: bool) -> bytes:
    pairs = [
        ("event", '"kv_memory.pool_end"'),
        ("schema_version", "1"),
        ("timestamp", '"2026-12-03T17:00:00Z"'),
        ("level", '"info"'),
        ("avail_bytes", "7"),
        ("ext", ext),
    ]
    if top_duplicate:
        pairs.append(("avail_bytes", "7"))
    return _object_text(pairs, spaced).encode() + b"\n"


@settings(max_examples=400, deadline=None)
@given(_json_texts())
def test_a_line_orjson_writes_back_unchanged_has_no_duplicate_key(text: str) -> None:
    line = text.encode() + b"\n"
    if orjson.dumps(orjson.loads(line), option=orjson.OPT_APPEND_NEWLINE) == line:
        assert not _has_duplicate(text)


@settings(max_examples=300, deadline=None)
@given(
    st.builds(_object_text, st.lists(st.tuples(_KEYS, _json_texts()), max_size=4), st.booleans()),
    st.booleans(),
    st.booleans(),
)
def test_validate_reports_a_duplicate_key_exactly_when_the_line_holds_one(
    ext: str, top_duplicate: bool, spaced: bool
) -> None:
    line = _event_line(ext, top_duplicate, spaced)
    validator = EventValidator()
    # the same line twice: the first goes through the slow path (a new kind of event), the second the hot loop
    findings = list(validate_lines("f.jsonl", [line, line], Counts(), validator))
    reported = [finding.line for finding in findings if "duplicate key" in finding.violation.message]
    expected = [1, 2] if _has_duplicate(line.decode()) else []
    assert reported == expected, findings


_CAP = 8


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.binary(max_size=20).map(lambda piece: piece.replace(b"\n", b"")), max_size=8),
    st.booleans(),
    st.integers(1, 24),
)
def test_block_reading_gives_the_lines_readline_gives(
    pieces: list[bytes], ends_with_newline: bool, block_bytes: int
) -> None:
    """Line for line, overlong lines (over a small cap, with their lengths) and a last line without an end included."""
    data = b"\n".join(pieces) + (b"\n" if ends_with_newline and pieces else b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inputs, "MAX_LINE_BYTES", _CAP)
        expected = list(bounded_lines(io.BytesIO(data), len(data)))
        got = list(range_lines(io.BytesIO(data), len(data), block_bytes))
    assert got == expected
    assert [type(line) for line in got] == [type(line) for line in expected]
    assert [line.length for line in got if isinstance(line, OverlongLine)] == [
        line.length for line in expected if isinstance(line, OverlongLine)
    ]
