"""What an operator must look at in a ledger: each flag a comparison beyond the figures' printed rounding.

A difference smaller than the rounding of the figures compared is no finding: two ranks that printed
``12.02 GiB`` and ``12.03 GiB`` may hold the same bytes. Each flag is a short code and the figures that
raised it, so that the text form, JSON and CSV say the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from kvlog.ledger.rows import Figure, LedgerRow
from kvlog.text.units import byte_figure

#: unaccounted memory beyond this (either way, past its uncertainty) is flagged: about what a CUDA context,
#: NCCL's buffers and allocator fragmentation take together on one rank, so that more says another process
#: or a consumer no line names
DEFAULT_UNACCOUNTED_THRESHOLD = 2 << 30
#: the figures compared between the ranks of one run
_COMPARED = ("device_total", "kv_committed", "free")


def flagged(rows: Iterable[LedgerRow], unaccounted_threshold: int = DEFAULT_UNACCOUNTED_THRESHOLD) -> list[LedgerRow]:
    """``rows`` with their flags, each a finding beyond the rounding of the figures it compares.

    Unaccounted memory beyond ``unaccounted_threshold``, a KV upper bound above the device, a budget
    exceeded after CUDA-graph capture, and ranks of one run (one file, one run number, the same kinds of
    rank: TP0 and TP1) whose figures differ.
    """
    rows = list(rows)
    found = {index: _own(row, unaccounted_threshold) for index, row in enumerate(rows)}
    groups: dict[tuple[str, int, str], list[int]] = {}
    for index, row in enumerate(rows):  # the ranks of one server run: one file, one run, the same kinds of rank
        groups.setdefault((row.source, row.run, "".join(filter(str.isalpha, row.ranks))), []).append(index)
    for members in groups.values():
        odd = {name: _odd_ones(rows, members, name) for name in {n for i in members for n in _figures(rows[i])}}
        for index in members:
            differ = [name for name in _figures(rows[index]) if index in odd[name]]
            if differ:
                found[index].append(f"ranks_differ: {', '.join(differ)}")
    return [dataclasses.replace(row, flags=tuple(found[index])) for index, row in enumerate(rows)]


def _own(row: LedgerRow, threshold: int) -> list[str]:
    flags = []
    unaccounted = row.unaccounted
    if unaccounted.value is not None and abs(unaccounted.value) - unaccounted.uncertainty > threshold:
        flags.append(f"unaccounted: {byte_figure(unaccounted.value)} beyond {byte_figure(threshold)}")
    va, ceiling = row.kv_va_upper_bound, row.ceiling
    if va.value is not None and ceiling.value is not None and _above(va, ceiling):
        flags.append(f"kv_va_above_device: {byte_figure(va.value)} of address space > {byte_figure(ceiling.value)}")
    graph = row.consumer("cuda_graph")
    if graph.known and row.budget.value is not None:
        held = [figure for _, figure in row.consumers if figure.known]
        used = Figure(
            sum(figure.value or 0 for figure in [*held, row.kv_committed]),
            sum(figure.uncertainty for figure in [*held, row.kv_committed] if figure.known),
        )
        if _above(used, row.budget):
            flags.append(f"budget_exceeded: {byte_figure(used.value)} after capture > {byte_figure(row.budget.value)}")
    return flags


def _above(figure: Figure, bound: Figure) -> bool:
    """``figure`` is larger than ``bound`` even at the ends of their ranges that are closest."""
    return (figure.value or 0) - figure.uncertainty > (bound.value or 0) + bound.uncertainty


def _figures(row: LedgerRow) -> list[str]:
    return [*_COMPARED[:1], *(name for name, _ in row.consumers), *_COMPARED[1:]]


def _figure(row: LedgerRow, name: str) -> Figure:
    return getattr(row, name) if name in _COMPARED else row.consumer(name)


def _odd_ones(rows: list[LedgerRow], members: list[int], name: str) -> set[int]:
    """The ranks of a run whose figure ``name`` is not what most of its ranks hold (beyond both roundings).

    Where most ranks agree with one another (TP7 of TP0-TP7 holds less free memory), only the others are
    named, so an operator sees the rank to look at; where no figure is held by most (two ranks that
    differ, four against four), every rank that differs from another is.
    """
    known = [index for index in members if _figure(rows[index], name).value is not None]
    if not known:
        return set()
    agreeing = {index: [other for other in known if _agree(rows, index, other, name)] for index in known}
    typical = max(known, key=lambda index: len(agreeing[index]))
    if 2 * len(agreeing[typical]) > len(known):
        return set(known) - set(agreeing[typical])
    return {index for index in known if len(agreeing[index]) < len(known)}


def _agree(rows: list[LedgerRow], index: int, other: int, name: str) -> bool:
    """Whether two ranks' figures ``name`` may be the same bytes (a rank agrees with itself and its repeats)."""
    own, theirs = _figure(rows[index], name), _figure(rows[other], name)
    if other == index or rows[other].ranks == rows[index].ranks:
        return True
    return abs((own.value or 0) - (theirs.value or 0)) <= own.uncertainty + theirs.uncertainty
