"""The streaming migrator's edges: options it refuses, lines it copies or reports, the look-ahead bounds,
events reused between lines of one shape, and the written key order.

Library calls (``Migrator``, ``FileRun``): the console contract is ``test_migration_cli.py``'s.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from migration_helpers import (
    POOL_V1,
    Taken,
    edited_migrations,
    migrate,
    migrated,
    shipped_chain,
    state,
    too_deep_migrations,
)

from kvlog.migration import engine, load_chain
from kvlog.migration.engine import FileRun, MigrateOptions, Migrator, OutputFormat
from kvlog.migration.errors import PlanError
from kvlog.migration.records import Record
from kvlog.migration.report import MigrationReport

POOL = (
    "[2026-07-24 08:00:32 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2652800, "
    "K size: 0.25 GB, V size: 0.25 GB"
)
ARENA = "[2026-07-22 14:01:02 TP0] KvVmmArena[0] ready: device=0 reserved=9.2 GiB granularity=2048 KiB"
SIZED = "[2026-07-24 08:01:40 TP0] Post-capture KV sizing: max_total_num_tokens=2097152, free memory=96.33 GB"
VLLM = "INFO 06-01 10:00:05 llm_engine.py:123] # GPU blocks: 2048, # CPU blocks: 512"


def lines_of(out: bytes) -> list[bytes]:
    return out.split(b"\n")


# -- options ------------------------------------------------------------------------------------------


def test_a_source_no_migration_reads_is_refused_naming_those_that_are() -> None:
    with pytest.raises(ValueError, match=r"no migrations read 'tgi' lines \(kvlog reads sglang, vllm\)"):
        Migrator(shipped_chain(), MigrateOptions(source="tgi"))


@pytest.mark.parametrize("version", [0, 3, -1])
def test_a_catalog_version_outside_the_catalog_is_refused(version: int) -> None:
    with pytest.raises(ValueError, match=rf"catalog version {version} is not known \(catalog versions are 1..2\)"):
        Migrator(shipped_chain(), MigrateOptions(to_catalog=version))


@pytest.mark.parametrize(
    ("options", "worded"),
    [
        (
            {"output_format": "text", "to_catalog": 1},
            "--to chooses the catalog version of JSON events: it needs -f jsonl",
        ),
        (
            {"legacy_generation": "sglang-text/2025-06"},
            "--legacy-generation chooses an old wording: it needs -f legacy",
        ),
    ],
)
def test_an_option_another_format_writes_is_refused_by_the_options_themselves(
    options: dict[str, Any], worded: str
) -> None:
    """One owner for "needs this format": every caller of the engine (migrate, follow, a library) meets it."""
    with pytest.raises(PlanError) as raised:
        MigrateOptions(**options)
    assert (
        raised.value.worded({"to_catalog": "--to", "output_format": "-f", "legacy_generation": "--legacy-generation"})
        == worded
    )


def test_both_ends_of_the_catalog_are_versions_to_write() -> None:
    assert Migrator(shipped_chain(), MigrateOptions(to_catalog=1)).to_catalog == 1
    assert Migrator(shipped_chain(), MigrateOptions(to_catalog=2)).to_catalog == 2
    assert Migrator(shipped_chain(), MigrateOptions()).to_catalog == 2


def test_a_source_reads_its_servers_lines_only() -> None:
    data = f"{VLLM}\n{POOL}\n".encode()
    out, report, _ = migrated(data, MigrateOptions(source="sglang"))
    assert lines_of(out)[0] == VLLM.encode()
    assert orjson.loads(lines_of(out)[1])["event"] == "kv_pool.allocation"
    assert (report.events, dict(report.servers)) == (1, {"sglang": 1})
    out, report, _ = migrated(data, MigrateOptions(source="vllm"))
    assert orjson.loads(lines_of(out)[0])["event"] == "kv_pool.capacity"
    assert lines_of(out)[1] == POOL.encode()
    assert dict(report.servers) == {"vllm": 1}


def test_a_log_with_no_server_line_is_counted_as_none() -> None:
    _, report, _ = migrated(b"plain text\n")
    assert (report.lines, dict(report.servers)) == (1, {"none": 1})


def test_writing_catalog_1_takes_events_down_their_chain() -> None:
    out, report, _ = migrated(f"{ARENA}\n{POOL}\n".encode(), MigrateOptions(to_catalog=1))
    arena, pool = (orjson.loads(line) for line in lines_of(out)[:2])
    assert (arena["schema_version"], arena["reserved_bytes"]) == (1, round(9.2 * (1 << 30)))
    assert (pool["schema_version"], "allocation_state" in pool) == (1, False)
    assert dict(report.by_event) == {"kv_arena.ready@1": 1, "kv_pool.allocation@1": 1}


# -- what is copied, what is reported -------------------------------------------------------------------


def test_a_line_that_is_not_utf8_is_reported_when_it_looks_like_a_memory_line() -> None:
    bad = b"[2026-07-24 08:00:32 TP0] KV Cache is allocated. K size: 1.00 GB\xff\n"
    out, report, dead = migrated(bad + b"\xfe decode batch\n")
    assert out == bad + b"\xfe decode batch\n"
    assert report.unparsed_memory_lines == 1
    assert dead[0]["line"] == 1
    assert dead[0]["reason"] == "not valid UTF-8 (invalid start byte at byte 64)"


def test_a_memory_line_no_wording_reads_names_the_servers_tried() -> None:
    line = "[2026-07-24 08:00:32 TP0] KV Cache is allocated. K size: lots"
    _, _, dead = migrated(f"{line}\n".encode())
    assert dead == [
        {
            "file": "ctx.log",
            "line": 1,
            "reason": "looks like a memory line but matches no known sglang or vllm wording",
            "text": line,
        }
    ]
    _, _, dead = migrated(f"{POOL}\n{line}\n".encode())
    assert dead[0]["reason"] == "looks like a memory line but matches no known sglang wording"


def test_memory_lines_the_user_allows_are_counted_apart_not_dead_lettered() -> None:
    line = "[2026-07-24 08:00:32 TP0] KV Cache is allocated. K size: lots"
    _, report, dead = migrated(f"{line}\n{line} more\n".encode(), MigrateOptions(allowed_unparsed=("lots$", "x^")))
    assert (report.allowed_unparsed_lines, report.unparsed_memory_lines, len(dead)) == (1, 1, 1)
    assert dead[0]["line"] == 2


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"event": "kv_pool.allocation", "schema_version": 1, ', "looks like a JSON event but cannot be read: "),
        ('{"event": "kv_pool.allocation", "schema_version": 1, "level": 1, "level": 2}', "duplicate key"),
    ],
)
def test_a_broken_json_event_is_rejected_and_copied(line: str, reason: str) -> None:
    out, report, dead = migrated(f"{line}\n".encode())
    assert out == f"{line}\n".encode()
    assert (report.rejected, report.unparsed_memory_lines, report.events) == (1, 1, 0)
    assert reason in dead[0]["reason"]


@pytest.mark.parametrize(
    "line",
    [
        '{"event": "kv_pool.allocation", ',  # no "schema_version": not an event's line
        "[1, 2]",
        '{"event": "my.event", "schema_version": 1}',
        '{"event": "kv_pool.allocation", "schema_version": "1"}',
        '{"event": "kv_pool.allocation", "schema_version": true}',
        '{"event": 7, "schema_version": 1}',
    ],
)
def test_json_that_is_no_catalog_event_is_copied_without_a_word(line: str) -> None:
    out, report, dead = migrated(f"{line}\n".encode())
    assert (out, report.rejected, report.unparsed_memory_lines, dead) == (f"{line}\n".encode(), 0, 0, [])


def test_a_version_the_catalog_lacks_is_reported_when_it_carries_a_memory_figure() -> None:
    line = '{"event": "kv_pool.allocation", "schema_version": 9, "text": "K size: 1.00 GB"}'
    out, report, dead = migrated(f"{line}\n".encode())
    assert out == f"{line}\n".encode()
    assert (report.rejected, dead[0]["reason"]) == (0, "kv_pool.allocation@9: the catalog has no such version")


def test_an_old_event_the_steps_make_invalid_is_rejected_with_the_violations() -> None:
    line = orjson.dumps({**POOL_V1, "num_tokens": "many"}).decode()
    out, report, dead = migrated(f"{line}\n".encode())
    assert out == f"{line}\n".encode()
    assert report.rejected == 1
    violation = "$.num_tokens: 'many' is not of type 'integer', 'null'"
    assert dead[0]["reason"] == f"the migrated kv_pool.allocation@2 is invalid: {violation}"
    assert dead[0]["line"] == 1


FOREIGN_PROVENANCE = [
    ({"source_format": "kvlog-json/v1", "inferred": "allocated"}, "'allocated' is not of type 'object'"),
    ({"source_format": "kvlog-json/v1", "inferred": {"allocation_state": 1}}, "1 is not of type 'object'"),
    ({"source_format": "kvlog-json/v1", "steps": 7}, "7 is not of type 'array'"),
    ({"steps": []}, "$.migrated.source_format: required field is missing"),
    ("by another tool", "'by another tool' is not of type 'object'"),
]


def current_pool_event() -> dict[str, Any]:
    """``POOL_V1`` migrated: the current kv_pool.allocation event."""
    return dict(orjson.loads(migrated(orjson.dumps(POOL_V1) + b"\n")[0]))


@pytest.mark.parametrize(("version", "to_catalog"), [(1, None), (1, 1), (2, 1)])
@pytest.mark.parametrize(("given", "why"), FOREIGN_PROVENANCE)
def test_an_event_a_step_would_fill_in_another_tools_provenance_of_is_rejected_whole(
    version: int, to_catalog: int | None, given: object, why: str
) -> None:
    """Another tool's ``migrated`` on an event the steps change (up, or down with --to): a dead letter, not a crash.

    A step adds its id and inferred fields to the provenance: it crashed on a string where an object
    goes, or a missing source_format. The line is copied as it was, counted as rejected with its line
    number, and the next lines are migrated.
    """
    event = POOL_V1 if version == 1 else current_pool_event()
    line = orjson.dumps({**event, "migrated": given}).decode()
    out, report, dead = migrated(f"{line}\n{POOL}\n".encode(), MigrateOptions(to_catalog=to_catalog))
    copied, pool, end = lines_of(out)
    assert (copied, end) == (line.encode(), b"")
    assert orjson.loads(pool)["migrated"]["line"] == 2
    assert (report.rejected, report.events) == (1, 1)
    [letter] = dead
    assert letter["reason"].startswith(f"kv_pool.allocation@{version}: migrated is not kvlog's provenance: ")
    assert why.replace("'", '"') in letter["reason"].replace("'", '"')
    assert (letter["file"], letter["line"], letter["text"]) == ("ctx.log", 1, line)


WIDE = 2**70  # beyond 64 bits: read as a number that keeps its text, which the compiled validator cannot take


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ({"source_format": "kvlog-json/v1", "steps": [WIDE]}, f"$.migrated.steps[0]: {WIDE} is not of type 'string'"),
        (
            {"source_format": "kvlog-json/v1", "inferred": {"dtype": WIDE}},
            f"$.migrated.inferred.dtype: {WIDE} is not of type 'object'",
        ),
        ({"source_format": WIDE}, f"$.migrated.source_format: {WIDE} is not of type 'string'"),
        ({"source_format": "kvlog-json/v1", "line": WIDE}, None),  # a line number no schema bounds: kvlog's
    ],
)
def test_provenance_with_an_integer_beyond_64_bits_is_judged_not_crashed_on(given: object, reason: str | None) -> None:
    """The compiled validator refuses such numbers (ValueError): the reference engine decides and explains."""
    line = json.dumps({**POOL_V1, "migrated": given})
    out, report, dead = migrated(f"{line}\n{POOL}\n".encode())
    first, pool, _ = lines_of(out)
    assert orjson.loads(pool)["migrated"]["line"] == 2
    if reason is None:
        assert (report.rejected, dead) == (0, [])
        assert orjson.loads(first)["schema_version"] == 2
    else:
        assert first == line.encode()
        assert [letter["reason"] for letter in dead] == [
            f"kv_pool.allocation@1: migrated is not kvlog's provenance: {reason}"
        ]
        assert report.rejected == 1


@pytest.mark.parametrize("ranks", [{"tp": []}, {"tp": {"a": 1}}, {"dp": 0, "tp": [1]}, {"tp": [], "ep": {}}])
def test_an_event_whose_ranks_are_not_numbers_is_rejected_as_invalid_and_the_file_goes_on(ranks: object) -> None:
    """A rank that is a list or an object has no server run to belong to: it crashed the context (unhashable)."""
    line = orjson.dumps({**POOL_V1, "ranks": ranks}).decode()
    out, report, dead = migrated(f"{line}\n{POOL}\n".encode())
    first, pool, _ = lines_of(out)
    assert first == line.encode()
    assert orjson.loads(pool)["migrated"]["line"] == 2
    assert report.rejected == 1
    [letter] = dead
    assert letter["reason"].startswith("the migrated kv_pool.allocation@2 is invalid: $.ranks.")
    assert "is not of type 'integer'" in letter["reason"]


@pytest.mark.parametrize("output_format", ["jsonl", "text", "legacy"])
@pytest.mark.parametrize(("given", "_why"), FOREIGN_PROVENANCE)
def test_a_current_event_with_another_tools_provenance_is_copied_or_refused_as_invalid(
    output_format: OutputFormat, given: object, _why: str
) -> None:
    """Nothing changes a current event: JSON lines copy it whatever its ``migrated`` holds (that crashed).

    The wordings people read are written only for valid events: there it is refused with the schema's reason.
    """
    line = orjson.dumps({**current_pool_event(), "migrated": given})
    out, report, dead = migrated(line + b"\n" + line + b"\n", MigrateOptions(output_format=output_format))
    assert out == line + b"\n" + line + b"\n"
    if output_format == "jsonl":
        assert (report.events, report.rejected, dead) == (2, 0, [])
    else:
        assert (report.events, report.rejected) == (0, 2)
        assert [letter["line"] for letter in dead] == [1, 2]
        assert dead[0]["reason"].startswith("the migrated kv_pool.allocation@2 is invalid: $.migrated")


def test_an_old_event_its_upgrade_step_cannot_apply_to_is_rejected_and_copied_and_the_file_goes_on(
    tmp_path: Path,
) -> None:
    """A step of ``--migrations`` converts a field the old event holds as text: the step's reason, not a crash."""
    edited_migrations(
        tmp_path,
        "kv_pool.allocation/v1-to-v2.toml",
        '[[ops]]\nop = "default"\nfield = "pool"',
        '[[ops]]\nop = "convert"\nfield = "num_tokens"\nfrom_unit = "gib"\nto_unit = "bytes"\n\n'
        '[[ops]]\nop = "default"\nfield = "pool"',
    )
    line = orjson.dumps({**POOL_V1, "num_tokens": "many"}).decode()
    good = orjson.dumps(POOL_V1).decode()
    out, dead = io.BytesIO(), []
    report = Migrator(load_chain(tmp_path / "migrations"), MigrateOptions()).migrate(
        "ctx.log", io.BytesIO(f"{line}\n{good}\n".encode()), out, dead.append
    )
    copied, upgraded, end = lines_of(out.getvalue())
    assert (copied, end) == (line.encode(), b"")
    assert orjson.loads(upgraded)["schema_version"] == 2
    assert (report.rejected, report.events) == (1, 1)
    reason = 'kv_pool.allocation/v1-to-v2: cannot apply to this input: num_tokens="many" is not a number'
    assert dead == [{"file": "ctx.log", "line": 1, "reason": reason, "text": line}]


def test_an_event_a_step_nests_deeper_than_json_is_written_is_rejected_and_copied(tmp_path: Path) -> None:
    """A step of ``--migrations`` sets ``ext`` 255 levels deep, past what orjson writes: a dead letter, not a crash."""
    too_deep_migrations(tmp_path)
    line = orjson.dumps(POOL_V1) + b"\n"
    out, dead = io.BytesIO(), []
    report = Migrator(load_chain(tmp_path / "migrations"), MigrateOptions()).migrate(
        "deep.log", io.BytesIO(line), out, dead.append
    )
    assert out.getvalue() == line
    assert (report.rejected, report.events) == (1, 0)
    assert dead[0]["reason"].startswith("the migrated event cannot be written: ")


def test_a_line_longer_than_any_memory_line_is_copied_unread_and_reported() -> None:
    """README: a line over 64 KiB is never parsed, nor passes unseen: counted, dead-lettered (cut), with its length."""
    long = POOL + " " * engine.MAX_LINE_BYTES
    out, report, dead = migrated(f"{long}\n{POOL}\n".encode())
    assert lines_of(out)[0] == long.encode()
    assert (report.events, report.lines, report.unparsed_memory_lines, report.overlong_lines) == (1, 2, 1, 1)
    assert [(letter["line"], letter["length"]) for letter in dead] == [(1, len(long) + 1)]
    assert dead[0]["reason"] == f"a line of {len(long) + 1} bytes, over the 64 KiB a memory line may take: not read"
    assert dead[0]["text"] == long[: engine.OVERLONG_TEXT_BYTES]


def test_a_line_of_64_kib_is_still_read() -> None:
    """README: a line *over* 64 KiB is never parsed; one of 64 KiB (its newline aside) is."""
    longest = POOL.ljust(engine.MAX_LINE_BYTES)
    out, report, dead = migrated(f"{longest}\n{longest} \n".encode())
    assert orjson.loads(lines_of(out)[0])["event"] == "kv_pool.allocation"
    assert lines_of(out)[1] == f"{longest} ".encode()
    assert (report.events, report.lines) == (1, 2)
    assert [(letter["line"], letter["length"]) for letter in dead] == [(2, engine.MAX_LINE_BYTES + 2)]


@pytest.mark.parametrize("ending", [b"\nb\n", b""])
def test_a_line_streamed_through_in_pieces_is_counted_once(ending: bytes) -> None:
    """A line of several blocks passes in pieces as they arrive (a memory line's start included): one line each."""
    data = b"x\n" + POOL.encode() + b" " * (3 * engine.MAX_LINE_BYTES) + ending
    out, report, dead = migrated(data)
    assert out == data
    assert (report.lines, report.events) == (2 + (ending != b""), 0)
    length = len(POOL) + 3 * engine.MAX_LINE_BYTES + (ending != b"")
    assert [(letter["line"], letter["length"], letter["text"]) for letter in dead] == [
        (2, length, (POOL + " " * 1024)[: engine.OVERLONG_TEXT_BYTES])
    ]


@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("size", [engine.MAX_LINE_BYTES + 1, engine.MAX_LINE_BYTES + 5000, 50 << 20])
@pytest.mark.parametrize("only_events", [False, True])
def test_every_line_too_long_to_read_is_reported_whatever_its_words_length_or_padding(
    where: str, size: int, only_events: bool
) -> None:
    """The class of issue 30 item 6: a memory line padded past the cap (before, inside or after its words, just
    over the cap or 50 MB, joined across blocks or streamed) is one dead letter and one unparsed line, never lost.
    """
    padding = "x" * (size - len(POOL))
    long = {"start": padding + " " + POOL, "middle": POOL[:40] + padding + POOL[40:], "end": POOL + " " + padding}
    data = f"{ARENA}\n{long[where]}\n{POOL}\n".encode()
    out, report, dead = migrated(data, engine.MigrateOptions(only_events=only_events))
    assert [(letter["line"], letter["length"]) for letter in dead] == [(2, len(long[where]) + 1)]
    assert (report.unparsed_memory_lines, report.overlong_lines, report.lines) == (1, 1, 3)
    if not only_events:
        assert lines_of(out)[1] == long[where].encode()  # copied byte for byte
    assert len(out.splitlines()) == (2 if only_events else 3)


def test_a_log_without_a_final_newline_keeps_it_missing_and_counts_every_line() -> None:
    out, report, _ = migrated(f"a\nb\n{POOL}".encode())
    assert out.startswith(b"a\nb\n{") and out.endswith(b"}")
    assert report.lines == 3
    out, report, _ = migrated(b"a\nb")
    assert (out, report.lines) == (b"a\nb", 2)


def test_only_events_writes_the_events_and_counts_every_other_line_as_changed() -> None:
    data = f"a\n{POOL}\nb\nc\n".encode()
    out, report, _ = migrated(data, MigrateOptions(only_events=True))
    assert [orjson.loads(line)["event"] for line in out.splitlines()] == ["kv_pool.allocation"]
    assert (report.lines, report.changed_lines) == (4, 4)
    unread = "[2026-07-24 08:00:33 TP0] KV Cache is allocated. K size: lots"  # a memory line, dropped too
    out, report, _ = migrated(f"{unread}\n{POOL}\n{unread}\n".encode(), MigrateOptions(only_events=True))
    assert (len(out.splitlines()), report.lines, report.changed_lines) == (1, 3, 3)


def test_keep_original_keeps_each_lines_text() -> None:
    out, _, _ = migrated(f"{POOL}\n".encode(), MigrateOptions(keep_original=True))
    assert orjson.loads(out)["migrated"]["original"] == POOL
    out, _, _ = migrated(f"{POOL}\n".encode())
    assert "original" not in orjson.loads(out)["migrated"]


# -- events reused between lines of one shape --------------------------------------------------------


def test_lines_of_one_message_get_their_own_time_ranks_line_and_context() -> None:
    """The second line's event is a copy of the first's: revising one must not revise the other."""
    message = POOL.split("] ", 1)[1]
    out = migrate(
        f"[2026-07-24 08:00:00 TP1] {ARENA.split('] ', 1)[1]}",
        f"[2026-07-24 08:00:32 TP0] {message}",
        f"[2026-07-24 08:00:33 TP1] {message}",
        f"[2026-07-24 08:00:34 TP0] {message}",
    )
    events: list[Any] = out[1:]
    assert [(e["timestamp"], e["ranks"], e["migrated"]["line"]) for e in events] == [
        ("2026-07-24T08:00:32Z", {"tp": 0}, 2),
        ("2026-07-24T08:00:33Z", {"tp": 1}, 3),
        ("2026-07-24T08:00:34Z", {"tp": 0}, 4),
    ]
    assert [state(e)[:2] for e in events] == [
        ("allocated", "v1-claims-allocated"),
        ("va_upper_bound", "arena-before-pool"),
        ("allocated", "v1-claims-allocated"),
    ]


def test_a_line_without_ranks_after_one_with_them_has_none() -> None:
    message = POOL.split("] ", 1)[1]
    out = migrate(f"[2026-07-24 08:00:32 TP3] {message}", f"[2026-07-24 08:00:33] {message}")
    assert [e.get("ranks") for e in out] == [{"tp": 3}, None]  # type: ignore[union-attr]


def test_forgetting_what_was_read_keeps_memory_bounded_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory of read messages is bounded: when full it is cleared, and lines read as before."""
    lines = [
        f"[2026-07-24 08:00:{s:02} TP0] KV Cache is allocated. K size: {s}.00 GB, V size: 1.00 GB." for s in range(6)
    ]
    expected = migrate(*lines, *lines)
    monkeypatch.setattr(engine, "RECOGNISED_MESSAGES", 2)
    assert migrate(*lines, *lines) == expected
    migrator = Migrator(shipped_chain(), MigrateOptions())
    migrator.migrate("ctx.log", io.BytesIO("".join(f"{line}\n" for line in lines).encode()), io.BytesIO())
    assert [(len(f.read) <= 2, len(f.shapes) <= 2) for f in migrator.families] == [(True, True)] * 2
    assert len(migrator.families[0].read) > 0


def test_a_message_printed_once_keeps_no_event_and_one_printed_twice_does() -> None:
    """Keeping an event costs its steps again: only a message seen before pays it, and the third line reuses it.

    On a held-out log no memory message recurs (random figures, many ranks): every line there would have
    paid the keeping for nothing.
    """
    migrator = Migrator(shipped_chain(), MigrateOptions())
    message = POOL.split("] ", 1)[1]
    kept = []
    for second in range(3):
        line = f"[2026-07-24 08:00:3{second} TP0] {message}\n"
        migrator.migrate("ctx.log", io.BytesIO(line.encode() * (second + 1)), io.BytesIO())
        kept.append(sum(len(family.shapes) for family in migrator.families))
        for family in migrator.families:
            family.read.clear(), family.shapes.clear(), family.seen.clear()
    assert kept == [0, 1, 1]


def test_every_event_is_written_in_the_written_order_whatever_order_its_keys_came_in() -> None:
    """The order of a key set is remembered: the second event of a set must be ordered like the first."""
    backwards = dict(reversed(list(POOL_V1.items())))
    out, _, _ = migrated(f"{orjson.dumps(backwards).decode()}\n{orjson.dumps(backwards).decode()}\n".encode())
    first, second = (list(orjson.loads(line)) for line in out.splitlines())
    assert first == second
    assert first[:5] == ["event", "schema_version", "timestamp", "level", "ranks"]
    assert first[-1] == "migrated"


def test_every_provenance_is_written_in_the_written_order_taking_events_down_to_catalog_1() -> None:
    """Output of ``--keep-original`` taken down with ``--to 1``: each event's ``lost`` goes before its ``original``."""
    once, _, _ = migrated(f"{POOL}\n{POOL}\n".encode(), MigrateOptions(keep_original=True))
    out, _, _ = migrated(once, MigrateOptions(to_catalog=1))
    keys = [list(orjson.loads(line)["migrated"]) for line in out.splitlines()]
    assert [key_set[-2:] for key_set in keys] == [["lost", "original"]] * 2


# -- the look-ahead ------------------------------------------------------------------------------------


def test_the_look_ahead_is_bounded_in_bytes_as_well_as_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "LOOKAHEAD_BYTES", 1000)
    out = migrate(POOL, "x" * 600, "y" * 600, SIZED)
    assert state(out[0]) == ("allocated", "look-ahead-exhausted", None)
    evidence = out[0]["migrated"]["inferred"]["allocation_state"]["evidence"]  # type: ignore[index]
    assert "within 100000 lines or 0 MiB" in evidence
    assert out[1:3] == [b"x" * 600, b"y" * 600]


@pytest.mark.parametrize(("spare", "told"), [(0, True), (-1, False)])
def test_the_look_ahead_holds_back_at_most_its_bound_in_bytes(
    monkeypatch: pytest.MonkeyPatch, spare: int, told: bool
) -> None:
    """A pool and the line after it, held back, fill the bound exactly: still told; one byte less: given up."""
    monkeypatch.setattr(engine, "LOOKAHEAD_BYTES", len(POOL) + 1 + 601 + spare)
    out = migrate(POOL, "x" * 600, SIZED)
    assert state(out[0])[1] == ("post-capture-after-pool" if told else "look-ahead-exhausted")


def test_within_the_look_ahead_a_later_line_still_tells() -> None:
    out = migrate(POOL, *["filler"] * 50, SIZED)
    assert state(out[0]) == ("va_upper_bound", "post-capture-after-pool", 52)


class _Follower(Taken):
    """Keeps each record as its line and event, as a follower reads them."""

    def __init__(self, events: list[tuple[int, dict[str, Any]]]) -> None:
        super().__init__()
        self.events = events

    def record(self, record: Record) -> None:
        self.events.append((record.line, record.event))


def follower(events: list[tuple[int, dict[str, Any]]]) -> FileRun:
    return FileRun(
        Migrator(shipped_chain(), MigrateOptions()), "ctx.log", MigrationReport(files=1), None, _Follower(events)
    )


def test_a_follower_gives_up_waiting_for_the_lines_read_up_to_a_bound() -> None:
    events: list[tuple[int, dict[str, Any]]] = []
    run = follower(events)
    run.feed(f"a\n{POOL}\nb\n{POOL}\n".encode())
    assert (events, run.written_lines) == ([], 1)
    run.release_through(1, "30 s")
    assert (events, run.written_lines) == ([], 1)  # the pool on line 2 was read after line 1
    run.release_through(2, "30 s")
    assert [line for line, _ in events] == [2]
    assert run.written_lines == 3  # the pool on line 4 still waits
    note = events[0][1]["migrated"]["inferred"]["allocation_state"]
    assert (note["rule"], note["evidence"]) == (
        "look-ahead-exhausted",
        "no later line on the same rank and run told more within 30 s; the line claims allocated",
    )
    run.feed(f"{SIZED}\n".encode())
    assert [line for line, _ in events] == [2, 4, 5]
    # the line speaks of the run's first pool, written already (a stream of events gets its correction):
    # the pool after it is a draft, allocated as its line claims
    assert state(events[1][1])[:2] == ("allocated", "v1-claims-allocated")


def test_the_look_ahead_counts_candidate_lines_only_events_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines that look like memory lines but are no event are dropped by --only-events, and still counted."""
    monkeypatch.setattr(engine, "LOOKAHEAD_LINES", 3)
    unread = "[2026-07-24 08:00:33 TP0] KV Cache is allocated. K size: lots"
    data = "".join(f"{line}\n" for line in (POOL, *[unread] * 4, SIZED)).encode()
    out, _, _ = migrated(data, MigrateOptions(only_events=True))
    first = orjson.loads(out.splitlines()[0])
    assert state(first) == ("allocated", "look-ahead-exhausted", None)


# -- events already written by kvlog: copied as they are ----------------------------------------------


def spaced(event: dict[str, Any]) -> str:
    """``event`` as another writer prints it (a space after each separator): not the bytes kvlog writes."""
    return ", ".join(f"{orjson.dumps(key).decode()}: {orjson.dumps(value).decode()}" for key, value in event.items())


def test_a_current_event_a_server_wrote_is_copied_byte_for_byte() -> None:
    """README: events already current are copied as they are (not re-written in kvlog's own spacing)."""
    (pool,) = migrate(POOL)
    assert isinstance(pool, dict)
    live_event = {key: value for key, value in reversed(pool.items()) if key != "migrated"}
    line = "{" + spaced(live_event) + "}"
    out, report, dead = migrated(f"{line}\n".encode())
    assert out == f"{line}\n".encode()
    assert (report.events, report.changed_lines, dead) == (1, 0, [])


def test_an_event_already_migrated_to_the_version_asked_for_is_copied_byte_for_byte() -> None:
    """Migrating twice with --to 1 changes nothing, whatever spacing the first run's output got since."""
    once, _, _ = migrated(f"{ARENA}\n{POOL}\n".encode(), MigrateOptions(to_catalog=1))
    lines = ["{" + spaced(orjson.loads(line)) + "}" for line in once.splitlines()]
    assert [orjson.loads(line)["schema_version"] for line in lines] == [1, 1]
    data = "".join(f"{line}\n" for line in lines).encode()
    out, report, dead = migrated(data, MigrateOptions(to_catalog=1))
    assert out == data
    assert (report.events, report.changed_lines, dead) == (2, 0, [])


@pytest.mark.parametrize("output_format", ["jsonl", "text", "legacy"])
def test_an_old_event_the_steps_make_invalid_is_rejected_in_every_output_format(output_format: OutputFormat) -> None:
    line = orjson.dumps({**POOL_V1, "num_tokens": "many"}).decode()
    out, report, dead = migrated(f"{line}\n".encode(), MigrateOptions(output_format=output_format))
    assert out == f"{line}\n".encode()
    assert (report.rejected, report.events) == (1, 0)
    assert dead[0]["reason"].startswith("the migrated kv_pool.allocation@2 is invalid: $.num_tokens: ")


def test_the_written_order_is_planned_per_key_tuple_and_an_event_in_order_is_not_copied() -> None:
    """Each key tuple is ordered once: an event already in order is itself, another follows its tuple's plan."""
    migrator = Migrator(shipped_chain(), MigrateOptions())
    in_order = engine.ordered({**POOL_V1, "migrated": {"source_format": "kvlog-json/v1", "line": 1, "file": "a"}})
    assert migrator.written(in_order) is in_order
    backwards = dict(reversed(list(in_order.items())))
    backwards["migrated"] = dict(reversed(list(in_order["migrated"].items())))
    expected = engine.ordered(backwards)
    for _ in range(2):  # planned, then following the plan
        written = migrator.written(backwards)
        assert (list(written), list(written["migrated"])) == (list(expected), list(expected["migrated"]))
        assert written == in_order
