"""A ledger as an operator reads it (a block of figures per run and rank, within 100 columns), or for tools.

JSON and CSV carry every figure in bytes, with its half-width of rounding and its lines; a figure no
line states is ``null`` (an empty CSV cell), never 0. The text says ``unknown``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from kvlog.ledger.rows import CONSUMERS, Figure, LedgerRow
from kvlog.text.printable import printable_name
from kvlog.text.units import byte_figure

FORMATS = ("text", "json", "csv")
_GIB = 1 << 30
#: the text form's width: a terminal, a CI log, an issue comment
WIDTH = 100
_LABELS = {
    "device_total": "device total",
    "kv_committed": "KV committed",
    "kv_va_upper_bound": "KV VA upper bound (not memory)",
    "free": "free (end of start-up)",
    "unaccounted": "unaccounted",
    "host_kv": "host KV (host memory)",
    "budget": "budget (engine may use)",
}


#: the row's own figures after the consumers, in the table's order
_OWN = ("kv_committed_bytes", "kv_va_upper_bound_bytes", "free_bytes")
_TAIL = ("host_kv_bytes", "budget_bytes", "unaccounted_bytes")


def render(rows: Sequence[LedgerRow], fmt: str, unaccounted_threshold: int) -> str:
    """``rows`` as ``text``, ``json`` or ``csv``."""
    if fmt == "json":
        document = {"rows": [_json_row(row) for row in rows], "unaccounted_threshold_bytes": unaccounted_threshold}
        return json.dumps(document, indent=2) + "\n"
    if fmt == "csv":
        return _csv(rows)
    return _text(rows, unaccounted_threshold)


def _figures(row: LedgerRow) -> list[tuple[str, Figure]]:
    """Each figure of the row by its JSON name (``weights_bytes``), in the table's order."""
    consumers = [(f"{name}_bytes", figure) for name, figure in row.consumers]
    own = [(name, getattr(row, name.removesuffix("_bytes"))) for name in (*_OWN, *_TAIL)]
    return [("device_total_bytes", row.device_total), *consumers, *own]


def _json_row(row: LedgerRow) -> dict[str, Any]:
    figures = _figures(row)
    consumers = {f"{name}_bytes" for name, _ in row.consumers}
    document: dict[str, Any] = {"source": row.source, "ranks": row.ranks, "run": row.run, "start": row.start}
    document["consumers"] = {name: figure.value for name, figure in figures if name in consumers}
    document |= {name: figure.value for name, figure in figures if name not in consumers}
    document["uncertainty_bytes"] = {name: figure.uncertainty for name, figure in figures if figure.known}
    document["evidence"] = {name: list(figure.evidence) for name, figure in figures if figure.known}
    document["flags"] = list(row.flags)
    return document


def _csv(rows: Sequence[LedgerRow]) -> str:
    """One row a run and rank: each figure, then its uncertainty and its lines (space-separated), then flags."""
    names = ["device_total_bytes", *(f"{name}_bytes" for name in CONSUMERS), *_OWN, *_TAIL]
    header = [
        "source",
        "ranks",
        "run",
        "start",
        *names,
        *(name.replace("_bytes", "_uncertainty_bytes") for name in names),
        *(name.replace("_bytes", "_evidence") for name in names),
        "flags",
    ]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        figures = _figures(row)
        record: dict[str, Any] = {"source": row.source, "ranks": row.ranks, "run": row.run, "start": row.start}
        record |= {name: figure.value for name, figure in figures}
        record |= {name.replace("_bytes", "_uncertainty_bytes"): figure.uncertainty for name, figure in figures}
        record |= {name.replace("_bytes", "_evidence"): " ".join(figure.evidence) for name, figure in figures}
        record["flags"] = "; ".join(row.flags)
        writer.writerow(record)
    return out.getvalue()


def _text(rows: Sequence[LedgerRow], threshold: int) -> str:
    lines: list[str] = []
    for row in rows:
        lines.append(
            _fit(
                f"{printable_name(PurePath(row.source).name)} · {row.ranks or 'no rank'} · run {row.run} ({row.start})"
            )
        )
        for name, figure in _figures(row):
            key = name.removesuffix("_bytes")
            label = _LABELS.get(key, key.replace("_", " "))
            if not figure.known and key in ("host_kv", "budget", "kv_va_upper_bound"):
                continue  # nothing of the kind in this run: no line to read
            rounding = f"± {byte_figure(figure.uncertainty)}" if figure.known and figure.uncertainty else ""
            where = _where(row.source, figure.evidence)
            lines.append(_fit(f"  {label:<31}{_gib(figure.value):>12}  {rounding:<12}  {where}".rstrip()))
        for flag in row.flags:
            lines.append(_fit(f"  ! {flag}"))
        lines.append("")
    lines.append(
        _fit(f"unaccounted = device total - consumers - KV committed - free; flagged beyond {byte_figure(threshold)}.")
    )
    lines.append("A consumer no line states is unknown, never 0; ± is what the printed rounding hides.")
    return "\n".join(lines) + "\n"


def _gib(value: int | None) -> str:
    """GiB to two decimals, as both servers print their figures (``12.02 GiB``); ``unknown`` for None."""
    return "unknown" if value is None else f"{value / _GIB:.2f} GiB"


def _where(source: str, evidence: tuple[str, ...]) -> str:
    """``line 12`` or ``lines 4, 7`` of the block's file (its title names it); another source by its name."""
    own = source + ":"
    shown = [at.removeprefix(own) if at.startswith(own) else printable_name(PurePath(at).name) for at in evidence]
    if not all(at.isdigit() for at in shown):
        return ", ".join(shown)
    return ("line " if len(shown) == 1 else "lines ") + ", ".join(shown) if shown else ""


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"
