"""The envelope: the fields every event carries besides its own, in the one order events are written.

Live events (``kvlog.emission``) and migrated ones (``kvlog.migration``) are built by different code,
yet a person reading raw JSON lines, a diff between a live and a migrated log, or a line-oriented
tool sees one layout only if both take their envelope's names and order from one place. So do the
keys of a migrated event's provenance (``migrated``) and the names of the inference rules recorded
there, which legacy rendering and people's queries match on. The names and their grouping follow
``schemas/_common.json`` (a test holds the two together); this module is part of the logging core and
imports only the standard library.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

#: written before the event's own fields: what it is, when, where from
HEAD: Final = ("event", "schema_version", "timestamp", "level", "pid", "ranks")
#: written after them: free extensions, then a migrated event's provenance
TAIL: Final = ("ext", "migrated")
#: every envelope field, in the order events are written
FIELDS: Final = HEAD + TAIL
#: the keys of ``migrated``, in the order they are written
PROVENANCE: Final = ("source_format", "file", "line", "steps", "inferred", "uncertainty_bytes", "lost", "original")


class InferenceRule(StrEnum):
    """The inference rules kvlog's own code applies (a migration file may name its own).

    Each names, in ``migrated.inferred``, how a field's value was worked out when the line did not say it.
    """

    NO_TIMESTAMP = "no-timestamp"
    NAIVE_TIME_AS_UTC = "naive-time-as-utc"
    PREVIOUS_LINE_TIMESTAMP = "previous-line-timestamp"
    DATE_NOT_ON_LINE = "date-not-on-line"
    NEXT_LINE_TIMESTAMP = "next-line-timestamp"
    RELEASE_LINE = "release-line"
    WORDING_RELEASE = "wording-release"
    YEAR_OPTION = "year-option"
    KV_CACHE_DTYPE_LINE = "kv-cache-dtype-line"
    ARENA_BEFORE_POOL = "arena-before-pool"
    SUB_POOLS_ARE_VA_BOUND = "sub-pools-are-va-bound"
    POST_CAPTURE_AFTER_POOL = "post-capture-after-pool"
    POST_CAPTURE_COMMITTED = "post-capture-committed"
    LOOKAHEAD_EXHAUSTED = "look-ahead-exhausted"
    NO_POST_CAPTURE_BEFORE_START_UP_END = "no-post-capture-before-start-up-end"
    DEVICE_MEMORY_BOUND = "device-memory-bound"
    MARKED_INFERRED = "marked-inferred"
    WRAPPER_TIMESTAMP = "wrapper-timestamp"
    CONTINUATION_LINE = "continuation-line"
    #: the driver's word: NVML sampled the process when the line was logged (``kvlog.nvml.measured_rule``)
    MEASURED = "measured"
    CUT_START = "cut-start"


class Wrapper(StrEnum):
    """The kinds of text put around a server's line by what carried it, named in ``migrated.steps``.

    Peeling a wrapper is the first thing done to a line, so each kind peeled is a step of its own
    (``wrapper/timestamp``), outer first, before the wording's: a key of its own in ``migrated`` would
    change the released schemas' shared definition (``kvlog check``: KV201).
    """

    #: terminal escape codes (colours, erase-line), with or without their ESC byte
    ANSI = "ansi"
    #: terminal colour pasted as HTML (``<font color=…>``, ``<span style=…>``, ``<b>``)
    HTML = "html"
    #: carriage returns before the line, or after it as a terminal shows them (``^M``, pasted)
    CARRIAGE_RETURN = "carriage-return"
    #: an RFC 3339 instant before the line (docker logs -t, kubectl logs --timestamps, CI runners, Buildkite)
    TIMESTAMP = "timestamp"
    #: a journald or syslog prefix (``Dec 07 10:00:00 host vllm[123]: ``)
    SYSLOG = "syslog"
    #: a pager's frame (k9s ``│``)
    BORDER = "border"
    #: a markdown blockquote (``> ``)
    QUOTE = "quote"
    #: spaces or tabs before the line (markdown code indentation)
    INDENT = "indent"
    #: Ray's ``[repeated 3x across cluster]`` after the line
    RAY_REPEATED = "ray-repeated"

    @property
    def step(self) -> str:
        """The id of this wrapper's peeling in ``migrated.steps``."""
        return f"{WRAPPER_STEP}{self.value}"


#: what the step ids of peeled wrappers begin with (``wrapper/ansi``)
WRAPPER_STEP: Final = "wrapper/"


#: the evidence of the rules that always rest on the same fact (the others quote the line they read)
EVIDENCE: Final[Mapping[InferenceRule, str]] = {
    InferenceRule.NO_TIMESTAMP: "the line has no timestamp",
    InferenceRule.NAIVE_TIME_AS_UTC: "sglang prints local time without a zone; read as UTC",
    InferenceRule.PREVIOUS_LINE_TIMESTAMP: "the line has no timestamp; the last one printed before it",
    InferenceRule.NEXT_LINE_TIMESTAMP: "the line has no timestamp, nor any line before it; the next one printed",
    InferenceRule.MARKED_INFERRED: "the line marks it (inferred: ...), as kvlog migrate --format text writes",
    InferenceRule.CONTINUATION_LINE: (
        "the line ends inside a known wording, and the next line, with no prefix of its own, completes it: "
        "one record wrapped over both (evidence_line is its last line)"
    ),
}
#: where ``migrated.inferred`` records the last line of a record the input split over lines (``CONTINUATION_LINE``)
LAST_LINE: Final = "last_line"
#: where ``migrated.inferred`` records what of a wording a line's cut start lost, put back (``CUT_START``)
WORDING: Final = "wording"
#: rules under which the timestamp was not on the line: writing the line back must not invent one
TIMESTAMP_NOT_ON_LINE: Final = frozenset(
    {InferenceRule.NO_TIMESTAMP, InferenceRule.PREVIOUS_LINE_TIMESTAMP, InferenceRule.NEXT_LINE_TIMESTAMP}
)


def envelope(  # noqa: PLR0917 - called for every emitted event, where keyword arguments cost
    event: Any,
    schema_version: Any,
    timestamp: str,
    level: str,
    pid: int | None = None,
    ranks: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """An event's head, in the written order, for its own fields to be added after.

    Building the dict in order once is what keeps emission cheap: re-ordering every event afterwards
    would copy it again. A version or pid that is None, and ranks that are None or empty, are left
    out, as the schemas want: a migrated line has no pid, an event unknown to the catalog no version.
    """
    head = {"event": event, "schema_version": schema_version, "timestamp": timestamp, "level": level, "pid": pid}
    if schema_version is None:
        del head["schema_version"]
    if pid is None:
        del head["pid"]
    if ranks:
        head["ranks"] = ranks  # the last field of the head: appending keeps the order
    return head


def inference(rule: str, evidence: str, evidence_line: int | None = None) -> dict[str, Any]:
    """One entry of ``migrated.inferred``: the rule, its evidence, and the line the evidence is on."""
    entry: dict[str, Any] = {"rule": str(rule), "evidence": evidence}
    if evidence_line is not None:
        entry["evidence_line"] = evidence_line
    return entry


def ordered(event: Mapping[str, Any]) -> dict[str, Any]:
    """``event`` with its keys in the written order: head, the event's own fields, ext, provenance.

    For events whose keys came in any order (a migrated event after its steps, an old kvlog line);
    the provenance's own keys are put in order too, unknown ones after.
    """
    head = {k: event[k] for k in HEAD if k in event}
    body = {k: v for k, v in event.items() if k not in head and k not in TAIL}
    tail = {k: event[k] for k in TAIL if k in event}
    migrated = tail.get("migrated")
    if isinstance(migrated, dict):
        tail["migrated"] = {k: migrated[k] for k in PROVENANCE if k in migrated} | migrated
    return head | body | tail


class _Clock:
    """RFC 3339 UTC timestamps with microseconds, formatting the date and time once per second."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")

    def stamp(self, now: float) -> str:
        second, prefix = self._second  # one tuple, read once: consistent across threads
        whole = int(now)
        if whole != second:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
            self._second = (whole, prefix)
        return "%s.%06dZ" % (prefix, (now - whole) * 1_000_000)  # noqa: UP031 - %d truncates, and is cheaper here


#: an event's ``timestamp`` at ``seconds`` since the epoch (emission, and the live handler's records)
utc_timestamp = _Clock().stamp
