"""Score kvlog on the wild corpus: real log blocks users pasted, each with a truth written by hand.

``tests/wild/<server>/<name>.log`` holds a block as pasted (its bytes exact), ``<name>.truth`` the truth
of each of its lines (the format is in ``tests/wild/README.md``). Every block goes through the real
migration engine, in process, and each line is scored against its truth: read right, read WRONG
(another event, a figure or a state that is not the line's), dead-lettered, or passed silently;
and every line that makes no event must come out byte-identical.

``python -m tests.wild_scoring`` prints the table per server and per class of issue 32 (``--misses``:
and every line not read right, with the reason).
"""

from __future__ import annotations

import io
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import Any

from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.migration.records import Record

WILD = Path(__file__).resolve().parent / "wild"

#: issue 32's classes of misses; 0 is a line none of them concerns
CLASSES = {
    0: "plain",
    1: "wrapper",
    2: "damaged",
    3: "negative",
    4: "usage",
    5: "harvest",
    6: "pattern",
    7: "dates",
}
#: what a memory line's truth may say it is
MEMORY_KINDS = ("event", "pending", "dead", "known", "usage")
#: the kinds whose right outcome is an event: the read rate's denominator
READ_KINDS = ("event", "pending")
OUTCOMES = ("read", "wrong", "dead", "silent")

UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 1 << 10,
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
}


class TruthError(ValueError):
    """A truth file that does not say what it must: named with its file and line."""


@dataclass(frozen=True)
class Bytes:
    """A figure of memory as the truth states it: the printed digits in the unit the server's code divides by."""

    value: Decimal
    unit: int
    #: half a unit of the last printed digit, in bytes: a printed figure stands for any value that rounds to it
    slack: Decimal

    def holds(self, got: object) -> bool:
        if not isinstance(got, int) or isinstance(got, bool):
            return False
        return abs(Decimal(got) - self.value * self.unit) <= self.slack + 1


def _figure(text: str) -> Bytes | None:
    for unit in sorted(UNITS, key=len, reverse=True):
        if text.endswith(unit):
            digits = text[: -len(unit)]
            try:
                value = Decimal(digits)
            except InvalidOperation:
                return None
            exponent = value.as_tuple().exponent
            assert isinstance(exponent, int)
            return Bytes(value, UNITS[unit], Decimal(UNITS[unit]) * Decimal(10) ** exponent / 2)
    return None


def _value(text: str) -> object:
    if text == "null":
        return None
    figure = _figure(text)
    if figure is not None:
        return figure
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@dataclass(frozen=True)
class Truth:
    """One line's truth: its kind, the classes of issue 32 it belongs to, and what its event must hold."""

    kind: str  # "-" (not memory), one of MEMORY_KINDS, or "part" (the rest of the record above)
    classes: tuple[int, ...] = ()
    event: str | None = None
    fields: dict[str, object] = field(default_factory=dict)
    figures: tuple[Bytes, ...] = ()


def parse_truth_line(text: str, where: str) -> Truth:
    words = text.split()
    if not words:
        raise TruthError(f"{where}: an empty truth line (write '-' for a line that is not memory)")
    head, rest = words[0], words[1:]
    classes: tuple[int, ...] = ()
    if rest and rest[0].startswith("[") and rest[0].endswith("]"):
        try:
            classes = tuple(int(c) for c in rest[0][1:-1].split(","))
        except ValueError:
            raise TruthError(f"{where}: classes are numbers: {rest[0]}") from None
        if not set(classes) <= set(CLASSES):
            raise TruthError(f"{where}: no such class in {rest[0]} (0..7)")
        rest = rest[1:]
    if head in ("-", "part", "dead", "known", "usage"):
        return Truth(head, classes)
    if head == "pending":
        figures = tuple(_figure(word) for word in rest)
        if not classes or None in figures:
            raise TruthError(f"{where}: 'pending [class] FIGURE...' takes its class and figures with units")
        return Truth("pending", classes, figures=tuple(f for f in figures if f is not None))
    if "." not in head:
        raise TruthError(f"{where}: {head!r} is no kind and no event name")
    values: dict[str, object] = {}
    for word in rest:
        name, sep, value = word.partition("=")
        if not sep:
            raise TruthError(f"{where}: {word!r} is not field=value")
        values[name] = _value(value)
    return Truth("event", classes, event=head, fields=values)


@dataclass
class Block:
    """One pasted block: its bytes, where it came from, and the truth of each of its lines."""

    path: Path
    server: str
    header: dict[str, str]
    lines: list[bytes]
    truths: list[Truth]

    @property
    def name(self) -> str:
        return f"{self.server}/{self.path.stem}"


def load_block(log: Path) -> Block:
    truth_path = log.with_suffix(".truth")
    if not truth_path.exists():
        raise TruthError(f"{log}: no truth file {truth_path.name}")
    header: dict[str, str] = {}
    body: list[str] | None = None
    for number, text in enumerate(truth_path.read_text(encoding="utf-8").splitlines(), 1):
        if body is not None:
            body.append(text)
        elif text.strip() == "---":
            body = []
            start = number + 1
        else:
            key, sep, value = text.partition(":")
            if not sep:
                raise TruthError(f"{truth_path}:{number}: the header is 'key: value' lines, then '---'")
            header[key.strip()] = value.strip()
    if body is None:
        raise TruthError(f"{truth_path}: no '---' line between the header and the truths")
    for key in ("source", "title", "server"):
        if key not in header:
            raise TruthError(f"{truth_path}: the header names no {key}")
    lines = log.read_bytes().splitlines(keepends=True)
    truths = [parse_truth_line(text, f"{truth_path}:{start + i}") for i, text in enumerate(body)]
    if len(truths) != len(lines):
        raise TruthError(f"{truth_path}: {len(truths)} truths for the {len(lines)} lines of {log.name}")
    if truths and truths[0].kind == "part":
        raise TruthError(f"{truth_path}:{start}: a 'part' continues the line above it: the first line has none")
    return Block(log, header["server"], header, lines, truths)


def blocks(root: Path = WILD) -> list[Block]:
    return [load_block(log) for log in sorted(root.glob("*/*.log"))]


class _Taken:
    """The engine's downstream: what passed through, as bytes, and the records in order."""

    def __init__(self) -> None:
        self.passed = bytearray()
        self.records: list[Record] = []

    def passthrough(self, data: bytes | memoryview, /) -> object:
        self.passed += data
        return None

    def record(self, record: Record, /) -> None:
        self.records.append(record)


@dataclass
class LineScore:
    block: str
    number: int
    text: str
    truth: Truth
    outcome: str  # one of OUTCOMES; for a line that is not memory: "read" stands for untouched
    why: str = ""
    year_right: bool | None = None


@dataclass
class BlockScore:
    block: Block
    lines: list[LineScore]
    #: lines that made no event but did not come out as they went in
    altered: list[int]


def _matches(truth: Truth, event: dict[str, Any]) -> str:
    """Why ``event`` is not what ``truth`` says (empty when it is)."""
    if truth.kind == "pending":
        figures = [value for name, value in event.items() if name.endswith("_bytes")]
        missing = [f for f in truth.figures if not any(f.holds(got) for got in figures)]
        return f"{event['event']} lacks {len(missing)} of the line's figures" if missing else ""
    if event.get("event") != truth.event:
        return f"{event.get('event')} where the line is {truth.event}"
    for name, want in truth.fields.items():
        got = event.get(name, "<absent>")
        if isinstance(want, Bytes):
            right = want.holds(got)
        elif isinstance(want, float) and isinstance(got, int | float):
            right = abs(got - want) <= 1e-9 * max(1.0, abs(want))
        else:
            right = got == want
        if not right:
            return f"{name}={got!r}, the line says {want}"
    return ""


def altered_lines(lines: list[bytes], passed: bytes, consumed: set[int]) -> list[int]:
    """The lines (1-based) that made no event and are not, byte for byte and in order, in ``passed``."""
    out = passed.splitlines(keepends=True)
    altered, j = [], 0
    for number, raw in enumerate(lines, 1):
        if number in consumed:
            if j < len(out) and out[j] == raw:  # an event's line kept as well (--keep-original)
                j += 1
            continue
        if j < len(out) and out[j] == raw:
            j += 1
        else:
            altered.append(number)
    return altered


@cache
def _migrator() -> Migrator:
    """The engine ``kvlog migrate`` runs with its default options: built once, for every block."""
    return Migrator(load_chain(), MigrateOptions())


def score_block(block: Block) -> BlockScore:
    taken, dead = _Taken(), []
    # a name no file has: the engine dates year-less lines from nothing but the lines themselves
    _migrator().take(f"<wild>/{block.name}.log", io.BytesIO(b"".join(block.lines)), taken, dead.append)
    events: dict[int, list[dict[str, Any]]] = {}
    for record in taken.records:
        events.setdefault(record.line, []).append(record.event)
    deads = {int(letter["line"]): str(letter.get("reason", "")) for letter in dead}
    year = int(block.header["year"]) if block.header.get("year", "").isdigit() else None
    # each record and its continuation lines
    owner: dict[int, int] = {}
    for number, truth in enumerate(block.truths, 1):
        owner[number] = owner[number - 1] if truth.kind == "part" else number
    scores: list[LineScore] = []
    for number, truth in enumerate(block.truths, 1):
        if truth.kind == "part":
            continue
        group = [n for n, o in owner.items() if o == number]
        got = [e for n in group for e in events.get(n, []) if e.get("event") != "kv_pool.state_corrected"]
        letter = next((deads[n] for n in group if n in deads), None)
        text = block.lines[number - 1].decode("utf-8", "replace").rstrip("\r\n")
        score = LineScore(block.name, number, text, truth, "silent")
        if got:
            if truth.kind in READ_KINDS:
                why = [_matches(truth, e) for e in got]
                score.outcome, score.why = ("read", "") if "" in why else ("wrong", why[0])
                stamp = str(got[0].get("timestamp", ""))
                score.year_right = None if year is None else stamp.startswith(f"{year}-")
            else:
                score.outcome = "wrong"
                score.why = f"{got[0].get('event')} from a line whose truth is {truth.kind!r}"
        elif letter is not None:
            score.outcome, score.why = ("read", "") if truth.kind == "dead" else ("dead", letter)
        elif truth.kind in ("-", "known", "usage"):
            score.outcome = "read"  # right: no event, no dead letter
        scores.append(score)
    consumed = {record.line for record in taken.records}
    return BlockScore(block, scores, altered_lines(block.lines, bytes(taken.passed), consumed))


@dataclass
class Table:
    """Counts per (server, class): memory lines of each outcome; and per server, the lines that are not memory."""

    memory: dict[tuple[str, str, int], Counter[str]] = field(default_factory=dict)
    other: dict[str, Counter[str]] = field(default_factory=dict)
    dated: dict[str, Counter[str]] = field(default_factory=dict)
    wrong: list[LineScore] = field(default_factory=list)
    altered: list[str] = field(default_factory=list)
    sources: dict[str, set[str]] = field(default_factory=dict)

    def add(self, result: BlockScore) -> None:
        server = result.block.server
        self.sources.setdefault(server, set()).add(result.block.header["source"].split()[0])
        self.altered += [f"{result.block.name}.log:{n}" for n in result.altered]
        for line in result.lines:
            if line.truth.kind == "-":
                counts = self.other.setdefault(server, Counter())
                counts["lines"] += 1
                counts[{"read": "untouched"}.get(line.outcome, line.outcome)] += 1
                if line.outcome == "wrong":
                    self.wrong.append(line)
                continue
            for cls in line.truth.classes or (0,):
                counts = self.memory.setdefault((server, line.truth.kind, cls), Counter())
                counts[line.outcome] += 1
            if line.outcome == "wrong":
                self.wrong.append(line)
            if line.year_right is not None:
                self.dated.setdefault(server, Counter())["right" if line.year_right else "wrong"] += 1

    def servers(self) -> list[str]:
        return sorted({server for server, _, _ in self.memory} | set(self.other))


def score(root: Path = WILD) -> tuple[Table, list[BlockScore]]:
    table, results = Table(), []
    for block in blocks(root):
        result = score_block(block)
        table.add(result)
        results.append(result)
    return table, results


def totals(results: list[BlockScore], server: str, kinds: tuple[str, ...] = READ_KINDS) -> Counter[str]:
    """Each of ``server``'s memory lines of ``kinds`` counted once, by outcome."""
    counts: Counter[str] = Counter()
    for result in results:
        if result.block.server == server:
            counts.update(line.outcome for line in result.lines if line.truth.kind in kinds)
    return counts


def read_rate(results: list[BlockScore], server: str) -> float:
    counts = totals(results, server)
    lines = sum(counts.values())
    return counts["read"] / lines if lines else 1.0


def render(table: Table, results: list[BlockScore]) -> Iterator[str]:
    def row(label: str, counts: Counter[str]) -> str:
        n = sum(counts[o] for o in OUTCOMES)
        cells = "".join(f"{counts[o]:>8}" for o in OUTCOMES)
        return f"  {label:<26}{n:>6}{cells}"

    header = f"  {'':<26}{'lines':>6}" + "".join(f"{o:>8}" for o in OUTCOMES)
    for server in table.servers():
        blocks_of = [r for r in results if r.block.server == server]
        yield (
            f"{server}: {len(blocks_of)} blocks from {len(table.sources.get(server, ()))} sources; "
            f"read {read_rate(results, server):.1%} of the lines that should make an event"
        )
        yield header
        yield row("should make an event", totals(results, server))
        for kind, label in (("dead", "must be dead-lettered"), ("known", "known, no event"), ("usage", "usage")):
            counts = totals(results, server, (kind,))
            if counts:
                yield row(f"{label} (read=right)", counts)
        yield "  by class of issue 32 (every memory line, read = right outcome; a line counts in each of its classes):"
        for cls, name in CLASSES.items():
            counts: Counter[str] = Counter()
            for (s, _, c), got in table.memory.items():
                if s == server and c == cls:
                    counts += got
            if counts:
                yield row(f"{cls} {name}", counts)
        other = table.other.get(server, Counter())
        yield (
            f"  not memory: {other['lines']} lines, {other['untouched']} untouched, "
            f"{other['dead']} dead-lettered, {other['wrong']} read as events"
        )
        dated = table.dated.get(server, Counter())
        if dated:
            yield f"  dates (class 7): {dated['right']} events in the year of the paste, {dated['wrong']} not"
        yield ""
    yield f"byte-identical: {len(table.altered)} lines that made no event came out changed"
    for where in table.altered:
        yield f"  ALTERED {where}"
    for line in table.wrong:
        yield f"  WRONG {line.block}.log:{line.number}: {line.why}\n        {line.text}"


def misses(results: list[BlockScore]) -> Iterator[str]:
    """Each memory line not read right, and each line that is not memory but was dead-lettered: what to fix."""
    for result in results:
        for line in result.lines:
            if line.outcome != "read":
                classes = ",".join(map(str, line.truth.classes)) or "0"
                yield f"{line.outcome.upper():<7}[{classes}] {line.block}.log:{line.number}: {line.why}"
                yield f"        {line.text[:200]}"


def main(argv: list[str]) -> int:
    table, results = score()
    for text in render(table, results):
        print(text)
    if "--misses" in argv:
        for text in misses(results):
            print(text)
    return 1 if table.wrong or table.altered else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
