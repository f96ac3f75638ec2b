"""Text generations: the wordings one era of sglang printed, compiled into parsers.

A generation file (``migrations/sglang-text/<id>.toml``) lists the templates that era introduced, in
the template language of ``kvlog.text.template``, and the catalog version whose field names they use. It
may also say that the era already printed today's wording of some events (``current = [...]``), or
that it *is* today's wording (``wording = "current"``): then the templates are ``kvlog.text.wording.CURRENT``
themselves, the ones the console renderer writes with. Placeholders without a unit take their type
from the event's JSON Schema, so an integer field captures digits and an enum captures its values.

Companion lines (``[[companions]]``) are recognised without becoming events: run boundaries, the
KV-cache dtype of older logs, warnings. They feed the per-rank context or are merely known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property, partial
from typing import Any

from kvlog.envelope import EVIDENCE, InferenceRule, envelope
from kvlog.migration.errors import GrammarError, OpError
from kvlog.migration.ops import Op, compile_op, mark_inferred, provenance, value_of
from kvlog.migration.sampling import USAGE_EVENT
from kvlog.migration.wording_windows import WORDING_WINDOWS
from kvlog.schema.catalog import Catalog
from kvlog.schema.errors import DerefError
from kvlog.schema.fields import Facts
from kvlog.text.prefix import FOREIGN_START, LinePrefix
from kvlog.text.template import SKIP, FieldSyntax, Parsed, Template, TemplateParser
from kvlog.text.wording import CURRENT

#: companion roles: a new server run starts, the KV-cache dtype of older logs, a post-capture line (evidence
#: that the run's pools were sized before capture), the server's start-up ended on every rank, a known memory
#: line of an era, one of ``known.toml``, or the server's version (which bounds the year of lines that print none)
ROLES = ("run_start", "kv_dtype", "post_capture", "start_up_end", "note", "known", "release")
#: the key under which an event read from kvlog's text carries the fields its line marks inferred, until upgraded
MARKED = "_marked"
#: the first characters of a wording a line shorter than its first words must share to be a cut of it (the
#: engine asks only of messages at least this long: ``kvlog.migration.transit.CUT_MIN_CHARACTERS``)
_CUT_HEAD = 8
#: the timestamp of a line that has none and follows none that had one
_NO_TIME = "1970-01-01T00:00:00Z"
#: (the first release printing a wording, its date, the date of the first release printing it no more, or None)
Window = tuple[str, str, str | None]


@dataclass(frozen=True)
class Rule:
    """One compiled template of a generation: an event template or a companion line."""

    template: Template
    parser: TemplateParser
    version: int | None
    role: str | None
    level: str
    ops: tuple[Op, ...] = ()
    whole: bool = True
    #: when the releases printed its lines (``kvlog.migration.wording_windows``); None: no harvested format says
    window: Window | None = None


@dataclass(frozen=True)
class Recognised:
    """A message one rule of a generation read."""

    generation: Generation
    rule: Rule
    parsed: Parsed
    #: fields the line marks as inferred (kvlog's ``--format text``), which the event keeps as inferred
    inferred: tuple[str, ...] = ()

    def marked(self, names: Sequence[str]) -> Recognised:
        """The same reading, with ``names`` marked as inferred (once the event is at its latest version)."""
        return replace(self, inferred=tuple(names))

    def event(self, prefix: LinePrefix) -> dict[str, Any]:
        """The event the message stands for, with its envelope and provenance (no file or line yet).

        A timestamp the prefix printed only in part is the caller's to complete (``kvlog.migration.dating``).
        """
        rule, template = self.rule, self.rule.template
        timestamp, level = prefix.timestamp, prefix.level or rule.level
        event = envelope(template.event, rule.version, timestamp or _NO_TIME, level, prefix.pid, dict(prefix.ranks))
        event.update(template.when)
        event.update(self.parsed.fields)
        for name in self.generation.nullable_required(template.event, rule.version or 0):
            event.setdefault(name, None)
        migrated = provenance(event)
        migrated["source_format"] = self.generation.id
        migrated["steps"] = [self.generation.id]
        if not prefix.exact:
            read_as = InferenceRule.NO_TIMESTAMP if timestamp is None else InferenceRule.NAIVE_TIME_AS_UTC
            mark_inferred(event, "timestamp", read_as, EVIDENCE[read_as])
        if self.parsed.uncertainty_bytes:
            migrated["uncertainty_bytes"] = dict(self.parsed.uncertainty_bytes)
        for op in rule.ops:
            op.run(event)
        if self.inferred:  # a field may exist only in the latest version (an old wording's allocation_state)
            event[MARKED] = list(self.inferred)
        return event


@dataclass(frozen=True)
class Draft:
    """A rule of a generation before it is compiled: what every message is asked of it, and how to compile it.

    A run meets few of a chain's thousand-odd wordings, and compiling them all was most of its start-up;
    a rule is compiled when a message first begins as its lines do (``starts``, which the chain keeps:
    ``kvlog.migration.steps``).
    """

    #: every way a message the rule reads can begin (``TemplateParser.starts``)
    starts: tuple[str, ...]
    #: the event its template writes (``companion.<role>`` for a companion line)
    event: str
    compile: Callable[[], Rule] = field(repr=False, compare=False)


@dataclass(frozen=True)
class Generation:
    """The wordings of one era of sglang, in the order they are tried."""

    id: str
    catalog_version: int
    drafts: tuple[Draft, ...]
    catalog: Catalog = field(repr=False, compare=False)
    #: each draft's rule once compiled, by place (``rule``)
    _compiled: list[Rule | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", [None] * len(self.drafts))

    @classmethod
    def of_rules(cls, generation_id: str, catalog_version: int, rules: Sequence[Rule], catalog: Catalog) -> Generation:
        """A generation whose rules are compiled already (a chain loaded for the first time checks every rule)."""
        generation = cls(generation_id, catalog_version, tuple(_compiled_draft(rule) for rule in rules), catalog)
        generation._compiled[:] = rules
        return generation

    def rule(self, place: int) -> Rule:
        """The rule of the draft at ``place``, compiled on first use."""
        compiled = self._compiled[place]
        if compiled is None:
            compiled = self._compiled[place] = self.drafts[place].compile()
        return compiled

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every rule, compiled (``kvlog check``, rendering in this wording, the tests): a run asks ``rule``."""
        return tuple(self.rule(place) for place in range(len(self.drafts)))

    @cached_property
    def server(self) -> str:
        """The server whose lines this generation reads (``sglang-text/2025-01`` -> ``sglang``).

        Kept once worked out: every event a generation reads dates its line by its server.
        """
        return self.id.split("/", 1)[0].removesuffix("-text")

    def recognise(self, message: str, *, glued: bool = False) -> Recognised | None:
        """The first rule whose wording is the whole message.

        With ``glued``, a rule's wording may instead be followed by the start of another logger's line
        (a message printed without its newline): the rule's figures are then read from the part before it.
        """
        if not message.startswith(self.starts):
            return None
        for place, draft in enumerate(self.drafts):
            if not message.startswith(draft.starts):
                continue
            rule = self.rule(place)
            if glued:
                parsed = rule.parser.parse_glued(message, FOREIGN_START)
            else:
                parsed = rule.parser.parse(message, whole=rule.whole)
            if parsed is not None:
                return Recognised(self, rule, parsed)
        return None

    def cut(self, message: str) -> Rule | None:
        """The first rule of which ``message`` is a line ended early (``TemplateParser.cut``), if any.

        Only on a line no rule read: a cut may end before a wording's first words are complete. Only
        wordings that begin with their own words are asked (one that begins with a slot would be asked
        of every line), and a message that begins none of them, as most lines no rule read, costs one
        ``startswith``.
        """
        starts, heads, rules = self._cut_starts
        if not message.startswith(starts) and not any(
            s.startswith(message) for s in heads.get(message[:_CUT_HEAD], ())
        ):
            return None
        for place, begins in rules:
            if (message.startswith(begins) or any(start.startswith(message) for start in begins)) and (
                rule := self.rule(place)
            ).parser.cut(message):
                return rule
        return None

    def cut_starts(self, message: str) -> list[tuple[Rule, str]]:
        """Each rule of which ``message`` is a line whose start was cut (``# GPU blocks: …`` less ``# ``), and the cut.

        Only on a line no rule read: ``message`` begins inside the first words of a wording, and with
        them restored reads whole. Asked through its first characters, one lookup.
        """
        return [
            (rule, lost)
            for place, lost, kept in self._cut_heads.get(message[:_CUT_HEAD], ())
            if message.startswith(kept)
            and (rule := self.rule(place)).parser.parse(lost + message, whole=rule.whole) is not None
        ]

    @cached_property
    def _cut_heads(self) -> dict[str, list[tuple[int, str, str]]]:
        """``cut_start``'s index: (a rule's place, the words cut, the words left) by the first characters left."""
        heads: dict[str, list[tuple[int, str, str]]] = {}
        for place, draft in enumerate(self.drafts):
            for begins in draft.starts:
                for cut in range(1, len(begins) - _CUT_HEAD + 1):
                    heads.setdefault(begins[cut : cut + _CUT_HEAD], []).append((place, begins[:cut], begins[cut:]))
        return heads

    @cached_property
    def _cut_starts(self) -> tuple[tuple[str, ...], dict[str, list[str]], tuple[tuple[int, tuple[str, ...]], ...]]:
        """What ``cut`` gates on: the wordings' own first words, them by their first characters, each rule's own."""
        drafts = enumerate(self.drafts)
        rules = tuple((place, begins) for place, draft in drafts if (begins := tuple(s for s in draft.starts if s)))
        starts = tuple(sorted({start for _, begins in rules for start in begins}))
        heads: dict[str, list[str]] = {}
        for start in starts:
            heads.setdefault(start[:_CUT_HEAD], []).append(start)
        return starts, heads, rules

    @cached_property
    def reads_usage_only(self) -> bool:
        """Whether every wording of this generation is a usage line's (read only with ``--usage``)."""
        return bool(self.drafts) and all(draft.event == USAGE_EVENT for draft in self.drafts)

    @cached_property
    def starts(self) -> tuple[str, ...]:
        """Every way a message this generation reads can begin: most lines are rejected by this alone."""
        return tuple(sorted({start for draft in self.drafts for start in draft.starts}))

    def templates(self) -> list[tuple[Template, int]]:
        """Event templates with the version of the event they write, for rendering in this wording."""
        return [(r.template, r.version) for r in self.rules if r.version is not None]

    def rule_starts(self) -> list[list[str]]:
        """Each rule's ``starts``, in order: what a chain keeps so that a later run compiles its rules lazily."""
        return [list(draft.starts) for draft in self.drafts]

    def nullable_required(self, event: str, version: int) -> list[str]:
        """Required fields that may be null: a line that does not print them says nothing, so null."""
        return _nullable_required(self.catalog, event, version)


def _compiled_draft(rule: Rule) -> Draft:
    return Draft(rule.parser.starts, rule.template.event, lambda: rule)


#: how to compile one rule of a generation, and the event its template writes
_Maker = tuple[str, Callable[[], Rule]]


def build_generation(
    generation_id: str, document: Mapping[str, Any], catalog: Catalog, starts: Sequence[Sequence[str]] | None = None
) -> Generation:
    """Compile a generation file's templates against the catalog.

    With ``starts`` (each rule's, as ``Generation.rule_starts`` gave them for the same file, catalog and
    code, every rule of which compiled then) the rules are compiled when first met instead.
    """
    version_spec = document.get("catalog_version")
    top = catalog.newest_release()
    if version_spec == "latest":
        catalog_version = top
    elif isinstance(version_spec, int) and 1 <= version_spec <= top:
        catalog_version = version_spec
    else:
        raise GrammarError(f"catalog_version must be 1..{top} or 'latest', not {version_spec!r}")
    ops_by_event: dict[str, list[Op]] = {}
    for spec in _tables(document, "ops"):
        target = spec.get("event")
        if not isinstance(target, str):
            raise GrammarError("each [[ops]] of a text generation names the 'event' it applies to")
        ops_by_event.setdefault(target, []).append(compile_op({k: v for k, v in spec.items() if k != "event"}))
    windows = WORDING_WINDOWS.get(generation_id, {})
    makers: list[_Maker] = [
        (str(spec.get("event")), partial(_template_rule, spec, catalog, catalog_version, ops_by_event, windows))
        for spec in _tables(document, "templates")
    ]
    inherited = document.get("current", [])
    if document.get("wording") == "current":
        inherited = sorted({t.event for t in CURRENT})
    elif "wording" in document:
        raise GrammarError(f"wording must be 'current', not {document['wording']!r}")
    if not isinstance(inherited, list):
        raise GrammarError("current must be a list of event names")
    current = partial(_event_rule, level="info", catalog=catalog, catalog_version=catalog_version, ops=ops_by_event)
    for name in inherited:
        templates = [t for t in CURRENT if t.event == name]
        if not templates:
            raise GrammarError(f"current: kvlog.text.wording.CURRENT has no wording of {name!r}")
        makers += [(name, partial(current, each, window=windows.get(each.text))) for each in templates]
    makers += [
        (f"companion.{spec.get('role')}", partial(_companion_rule, spec, windows))
        for spec in _tables(document, "companions")
    ]
    unused = set(ops_by_event) - {event for event, _ in makers}
    if unused:
        raise GrammarError(f"[[ops]] for events this generation does not write: {', '.join(sorted(unused))}")
    return _generation(generation_id, catalog_version, makers, catalog, starts)


def build_known(
    generation_id: str, document: Mapping[str, Any], catalog: Catalog, starts: Sequence[Sequence[str]] | None = None
) -> Generation:
    """Compile ``known.toml``: memory lines a server prints that are deliberately no event, each with why.

    They are recognised by how they begin (whatever follows), after every era's wordings were tried,
    so that a known line never hides an event template of the same words. ``starts``: as ``build_generation``.
    """
    windows = WORDING_WINDOWS.get(generation_id, {})
    makers: list[_Maker] = []
    for spec in _tables(document, "known"):
        reason, texts = spec.get("reason"), spec.get("texts")
        if set(spec) - {"texts", "reason"}:
            raise GrammarError(f"a [[known]] group has 'texts' and a 'reason', nothing else: {dict(spec)!r}")
        if not isinstance(reason, str) or not reason.strip():
            raise GrammarError(f"a [[known]] group says why its lines are no event, in a non-empty 'reason': {texts!r}")
        if not isinstance(texts, list) or not texts or not all(isinstance(text, str) and text for text in texts):
            raise GrammarError(f"a [[known]] group lists the starts of its lines in 'texts': {reason!r}")
        makers += [
            ("companion.known", partial(_companion_rule, {"role": "known", "text": text, "match": "prefix"}, windows))
            for text in texts
        ]
    return _generation(generation_id, catalog.newest_release(), makers, catalog, starts)


def _generation(
    generation_id: str,
    catalog_version: int,
    makers: Sequence[_Maker],
    catalog: Catalog,
    starts: Sequence[Sequence[str]] | None,
) -> Generation:
    """The generation of ``makers``: compiled now, unless each rule's ``starts`` are known (then when first met)."""
    if starts is None or len(starts) != len(makers):
        return Generation.of_rules(generation_id, catalog_version, [make() for _, make in makers], catalog)
    drafts = tuple(Draft(tuple(begins), event, make) for (event, make), begins in zip(makers, starts, strict=True))
    return Generation(generation_id, catalog_version, drafts, catalog)


def _tables(document: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    tables = document.get(key, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise GrammarError(f"{key} must be an array of tables ([[{key}]])")
    return tables


def _template(spec: Mapping[str, Any]) -> Template:
    event, text, when = spec.get("event"), spec.get("text"), spec.get("when", {})
    sums = spec.get("sums", [])
    if not isinstance(event, str) or not isinstance(text, str) or not isinstance(when, dict):
        raise GrammarError(f"a template needs a string 'event' and 'text' (and a table 'when'): {dict(spec)!r}")
    if not isinstance(sums, list) or not all(isinstance(name, str) for name in sums):
        raise GrammarError(f"a template's 'sums' is a list of the field names it prints in parts: {dict(spec)!r}")
    try:
        return Template(event, text, {k: value_of(v) for k, v in when.items()}, frozenset(sums))
    except OpError as exc:
        raise GrammarError(str(exc)) from None


def _template_rule(
    spec: Mapping[str, Any],
    catalog: Catalog,
    catalog_version: int,
    ops: Mapping[str, list[Op]],
    windows: Mapping[str, Window],
) -> Rule:
    """The rule of one ``[[templates]]`` table of a generation file."""
    template = _template(spec)
    window = windows.get(template.text)
    return _event_rule(template, spec.get("level", "info"), catalog, catalog_version, ops, window=window)


def _version_at(catalog: Catalog, event: str, catalog_version: int) -> int:
    if event not in catalog.schemas:
        raise GrammarError(f"unknown event {event!r}")
    version = catalog.at_catalog_version(event, catalog_version)
    if version is None:
        raise GrammarError(f"{event} does not exist in catalog version {catalog_version}")
    return version


def _event_rule(
    template: Template,
    level: Any,
    catalog: Catalog,
    catalog_version: int,
    ops: Mapping[str, list[Op]],
    *,
    window: Window | None,
) -> Rule:
    """An event template's rule; ``window``: the releases that printed its lines (``wording_windows``), if known."""
    version = _version_at(catalog, template.event, catalog_version)
    try:
        fields = catalog.fields(template.event, version)
    except DerefError as exc:
        raise GrammarError(f"{template.event}@{version}: {exc}") from None
    try:
        printed = template.fields()
    except ValueError as exc:  # unbalanced sections: the file is named by the caller
        raise GrammarError(str(exc)) from None
    printed = [name for name in printed if name != SKIP]
    unknown = [name for name in [*printed, *template.when] if name not in fields]
    if unknown:
        raise GrammarError(f"{template.event}@{version} has no field {', '.join(unknown)} (template {template.text!r})")
    if level not in ("debug", "info", "warning", "error", "critical"):
        raise GrammarError(f"level {level!r} is not a log level")
    syntax = {name: field_syntax(fields[name].facts) for name in printed}
    try:
        parser = template.parser(syntax)
    except ValueError as exc:
        raise GrammarError(str(exc)) from None
    return Rule(template, parser, version, None, level, tuple(ops.get(template.event, ())), window=window)


def _companion_rule(spec: Mapping[str, Any], windows: Mapping[str, Window]) -> Rule:
    """A companion line's rule, with the window of releases that printed it where ``windows`` (by text) knows it."""
    role, text, kinds = spec.get("role"), spec.get("text"), spec.get("fields", {})
    if spec.get("match", "whole") not in ("whole", "prefix"):
        raise GrammarError("companion match must be 'whole' or 'prefix'")
    if role not in ROLES:
        raise GrammarError(f"companion role must be one of {', '.join(ROLES)}, not {role!r}")
    if not isinstance(text, str) or not isinstance(kinds, dict):
        raise GrammarError(f"a companion needs a string 'text' and a table 'fields': {dict(spec)!r}")
    template = Template(f"companion.{role}", text)
    syntax: dict[str, FieldSyntax] = {}
    try:
        for name in template.fields():
            kind = kinds.get(name, "string")
            if kind not in ("integer", "number", "string"):
                raise GrammarError(f"companion field {name!r}: kind must be integer, number or string")
            syntax[name] = FieldSyntax(kind)
        parser = template.parser(syntax)
    except GrammarError:
        raise
    except ValueError as exc:  # unbalanced sections, an unknown unit: the file is named by the caller
        raise GrammarError(str(exc)) from None
    whole = spec.get("match") != "prefix"
    return Rule(template, parser, None, str(role), "info", whole=whole, window=windows.get(text))


def field_syntax(facts: Facts) -> FieldSyntax:
    """How a field is written in a line, from what its schema says of its values."""
    if facts.kind == "enum":
        return FieldSyntax("string", tuple(str(v) for v in facts.choices), nullable=facts.nullable)
    return FieldSyntax(facts.kind, nullable=facts.nullable, signed=facts.kind != "string" and facts.signed)


@cache
def _nullable_required(catalog: Catalog, event: str, version: int) -> list[str]:
    fields = catalog.fields(event, version)
    required = catalog.schema(event, version).get("required", ())  # in its order: the event's keys follow it
    return [name for name in required if name in fields and fields[name].facts.nullable]
