r"""Records damaged in transit: split over two lines, glued after a progress bar, or cut.

People paste logs wrapped by hand or by a terminal at a fixed width (``… Available KV cache memory:
12.02`` then ``GiB``), and logs get cut (a truncated file, a paste that stopped). Such a first line
is a beginning of some wording (``TemplateParser.cut``), never a reading: its last figure may have
lost digits (``12.0`` of ``12.02 GiB``). So the engine holds it for one input line
(``FileRun._continued``): if that line has no prefix of its own, does not read alone, and the two
together read as a known wording, one event is made of both (``migrated.line`` names the first, and
``migrated.inferred.last_line``, under the rule ``continuation-line``, the second as its evidence
line; a rejected one passes both through byte for byte); otherwise
the first line is dead-lettered as a cut record, and copied through as it was. A line whose start was
cut (``GPU blocks: 1952, # CPU blocks: 2048``, the ``# `` lost) may read whole as a wording once what
was lost is put back: it is read so where one wording reads it and the cut took no letter or digit
(``migrated.inferred.wording``, the rule ``cut-start``, says what was put back), else dead-lettered as a
cut record (``cut_start_reason``), since the words lost may have named another device (``# TPU
blocks``) or pool. One mechanism for every
server: it asks only the wordings and the prefixes the engine already has.

A tqdm bar redraws itself with ``\r``, and the server's next line is printed after the last drawing;
a paste often loses the ``\r`` (``… 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] Capture cuda graph
begin. …``). The record is what follows the bar's last ``\r``, or else its last timing trailer
(``[elapsed<remaining, rate]``, whatever the bar's description and progress): ``unglued``. The bar
is kept as the glue before the record, never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the end of a tqdm bar's drawing: its timing, ``[00:36<00:00,  1.45it/s]``, ``[00:00<?, ?it/s]``, ``[1:02:03<00:01]``
_BAR_END = re.compile(r"\[(?:[0-9]{1,4}:)?[0-9]{1,2}:[0-9]{2}<[^\]\r\n]{0,64}\]")
#: the fewest characters of a message that are a cut record (``Load`` alone begins a wording, and says nothing)
CUT_MIN_CHARACTERS = 16


@dataclass(frozen=True, slots=True)
class Open:
    """A line that ended inside a known wording, waiting for the next input line."""

    raw: bytes
    line: int
    text: str
    #: the wording it begins, as the dead letter names it
    wording: str


def joined(first: str, second: str) -> tuple[str, ...]:
    """What two lines may have been before they were split, in the order they are tried.

    A terminal wraps at a fixed width, inside a word or a figure, adding nothing (``12.0`` + ``2 GiB``);
    a person wraps at a space, which the line break replaced (``12.02`` + ``GiB``), and may indent what
    follows.
    """
    first = first.rstrip("\r\n")
    second = second.rstrip("\r\n")
    return first + second, " ".join((first.rstrip(" \t"), second.strip(" \t")))


def cut_reason(opened: Open) -> str:
    """The dead letter's reason for a line that ended inside a wording and that no line completed."""
    return (
        f"cut record: the line ends inside the wording {opened.wording!r}, and the line after it does "
        "not complete it; not read, since its last figure may have lost digits or its unit"
    )


def cut_start_reason(wording: str) -> str:
    """The dead letter's reason for a line that begins inside a wording: what was cut before it is unknown."""
    return (
        f"cut record: the line begins inside the wording {wording!r}, its start cut; not read, since what "
        "was cut may have named another device or pool"
    )


def unglued(text: str) -> tuple[str, str] | None:
    r"""``text`` as the progress bar glued before a record and the record (None: no bar is glued before one).

    After the bar's last ``\r`` where the line has one, else after the last timing a bar draws.
    """
    if "\r" in text:
        before, _, tail = text.rpartition("\r")
        return before + "\r", tail
    end = None
    for end in _BAR_END.finditer(text):  # noqa: B007 - the last one
        pass
    if end is None or end.end() == len(text):
        return None
    return text[: end.end()], text[end.end() :]
