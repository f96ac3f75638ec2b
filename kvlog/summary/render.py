"""A fleet summary as an operator reads it (a text table), or for tools (JSON, CSV): the same numbers, in bytes."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

from kvlog.summary.fleet import FleetSummary, RunRow
from kvlog.text.printable import printable_name
from kvlog.text.units import byte_figure

FORMATS = ("text", "json", "csv")
#: the byte columns, in table order, with their text heading
_BYTES = (
    ("reserved_va_bytes", "KV VA reserved"),
    ("committed_kv_bytes", "KV committed (peak)"),
    ("printed_allocated_va_bytes", "printed allocated, was VA"),
    ("overstated_bytes", "overstated"),
    ("committed_unknown_bytes", "committed unknown"),
    ("overstated_max_bytes", "overstated at most"),
    ("weights_bytes", "weights"),
    ("free_bytes", "free (last)"),
    ("host_kv_bytes", "host KV"),
)
_TOTALS = (*(name for name, _ in _BYTES if name != "free_bytes"), "unparsed_memory_lines")


def render(summary: FleetSummary, fmt: str) -> str:
    """``summary`` as ``text``, ``json`` or ``csv``."""
    if fmt == "json":
        return _json(summary)
    if fmt == "csv":
        return _csv(summary)
    return _text(summary)


def _totals(summary: FleetSummary) -> dict[str, int]:
    """The totals, with how many runs' weights are unknown (the total weights are the others')."""
    totals = {name: summary.total(name) for name in _TOTALS} | {"runs": len(summary.rows)}
    return totals | {"weights_unknown_runs": summary.unknown("weights_bytes")}


def _json(summary: FleetSummary) -> str:
    document = {
        "runs": [dataclasses.asdict(row) for row in summary.rows],
        "totals": _totals(summary),
        "unparsed_outside_runs": summary.unparsed_outside_runs,
    }
    return json.dumps(document, indent=2) + "\n"


def _csv(summary: FleetSummary) -> str:
    """One row a run, then a ``(total)`` row (its ``run`` column: how many runs; unparsed: before any run too)."""
    out = io.StringIO()
    names = [field.name for field in dataclasses.fields(RunRow)]
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row in summary.rows:
        writer.writerow(dataclasses.asdict(row))
    totals = _totals(summary)
    known = {name: totals[name] for name in _TOTALS if name != "weights_bytes" or not totals["weights_unknown_runs"]}
    writer.writerow({"source": "(total)", "run": totals["runs"], **known})
    return out.getvalue()


def _text(summary: FleetSummary) -> str:
    headings = ["source", "ranks", "run", "start", *(heading for _, heading in _BYTES), "unparsed"]
    table = [headings]
    for row in summary.rows:
        sizes = [_cell(row, name) for name, _ in _BYTES]
        table.append(
            [
                printable_name(row.source),
                row.ranks or "-",
                str(row.run),
                row.start,
                *sizes,
                str(row.unparsed_memory_lines),
            ]
        )
    totals = _totals(summary)
    table.append(
        [
            "total",
            "",
            str(len(summary.rows)),
            "",
            *(_total(totals, name) for name, _ in _BYTES),
            str(totals["unparsed_memory_lines"]),
        ]
    )
    widths = [max(len(line[column]) for line in table) for column in range(len(headings))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.insert(len(lines) - 1, lines[1])
    overstated, unknown = totals["overstated_bytes"], totals["committed_unknown_bytes"]
    claimed = _size(totals["printed_allocated_va_bytes"])
    lines.append("")
    if unknown:
        lines.append(
            f"The logs printed {claimed} of KV pools as allocated that were address-space upper bounds; between "
            f"{_size(overstated)} and {_size(overstated + unknown)} of it was never committed memory (for "
            f"{_size(unknown)} of it no line says how much was committed)."
        )
    else:
        lines.append(
            f"The logs printed {claimed} of KV pools as allocated that were address-space upper bounds; "
            f"{_size(overstated)} of it ({overstated} bytes) was never committed memory."
        )
    lines.append("Totals add up runs: a GPU that restarted counts once per run.")
    if summary.unparsed_outside_runs:
        lines.append(f"{summary.unparsed_outside_runs} unparsed memory line(s) came before any run of their ranks.")
    return "\n".join(lines) + "\n"


def _size(value: int | None) -> str:
    return "-" if value is None else byte_figure(value)


def _cell(row: RunRow, name: str) -> str:
    """A row's figure: weights no line stated are ``unknown``, never ``0 B``; inferred ones say so."""
    if name == "weights_bytes":
        return byte_figure(row.weights_bytes, inferred=row.weights_inferred)
    return _size(getattr(row, name))


def _total(totals: dict[str, int], name: str) -> str:
    unknown = totals["weights_unknown_runs"] if name == "weights_bytes" else 0
    if unknown:
        return f"{_size(totals[name])} + unknown ({unknown} run(s))"
    return _size(totals.get(name))
