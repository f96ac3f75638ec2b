"""The score table (stdout and Markdown) and the survivors, each with its key and its edit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mutation_tool.config import Config
from mutation_tool.running import EQUIVALENT, KILLED, SURVIVED, TIMEOUT, Result

COLUMNS = ("module", "mutants", "killed", "timeout", "survived", "equivalent", "score")


@dataclass(frozen=True)
class Row:
    """One module's figures."""

    module: str
    mutants: int
    killed: int
    timeout: int
    survived: int
    equivalent: int

    @property
    def score(self) -> str:
        """(killed + timeout) / (mutants - equivalent), as a percentage; "-" when nothing counts."""
        counted = self.mutants - self.equivalent
        if counted == 0:
            return "-"
        return f"{100 * (self.killed + self.timeout) / counted:.1f}%"

    def cells(self) -> tuple[str, ...]:
        """The row as text, in the order of COLUMNS."""
        figures = (self.mutants, self.killed, self.timeout, self.survived, self.equivalent)
        return (self.module, *(str(figure) for figure in figures), self.score)


def rows(modules: Iterable[str], results: list[Result]) -> list[Row]:
    """One row per module, in the order given."""
    table = []
    for module in modules:
        statuses = [result.status for result in results if result.mutant.module == module]
        table.append(
            Row(
                module,
                len(statuses),
                statuses.count(KILLED),
                statuses.count(TIMEOUT),
                statuses.count(SURVIVED),
                statuses.count(EQUIVALENT),
            )
        )
    return table


def text_table(table: list[Row]) -> str:
    """The table, columns aligned, for a terminal."""
    lines = [COLUMNS, *(row.cells() for row in table)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if column == 0 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    )


def survivors(results: list[Result]) -> str:
    """Each survivor: its key (and why, when no test ran it), then ``- old line`` and ``+ new line``."""
    blocks = []
    for result in results:
        if result.status != SURVIVED:
            continue
        note = f"  ({result.note})" if result.note else ""
        mutant = result.mutant
        blocks.append(f"{mutant.key}{note}\n  - {mutant.old_line}\n  + {mutant.new_line}")
    return "\n".join(blocks)


def markdown(table: list[Row], results: list[Result], config: Config, when: str, command: str) -> str:
    """The table for TESTING.md, with the date and the exact command, and the equivalent mutants met."""
    lines = [
        f"Measured {when} with `{command}`:",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * (len(COLUMNS) - 1),
    ]
    for row in table:
        cells = row.cells()
        lines.append(f"| `{cells[0]}` | " + " | ".join(cells[1:]) + " |")
    equivalents = [result.mutant.key for result in results if result.status == EQUIVALENT]
    if equivalents:
        lines += ["", "Equivalent mutants (no test can tell them from the original):", ""]
        for key in equivalents:
            entry = config.equivalent(key)
            lines.append(f"- `{key}`: {entry.reason if entry else ''}")
    return "\n".join(lines) + "\n"


def equivalents_markdown(config: Config) -> str:
    """Every mutant ``config`` judges equivalent, by module, with its reason: TESTING.md's list, generated.

    The configuration is the one owner of the judgements (the tool acts on it); TESTING.md shows this
    text, and a test keeps the two the same.
    """
    by_module: dict[str, list[str]] = {}
    for entry in config.equivalents:
        module, _, rest = entry.key.partition("::")
        by_module.setdefault(module, []).append(f"- `{rest}`: {entry.reason}")
    lines: list[str] = []
    for module in sorted(by_module):
        lines += [f"### `{module}` ({len(by_module[module])})", "", *by_module[module], ""]
    return "\n".join(lines)
