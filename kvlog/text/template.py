"""The template language: one text both renders an event as a line and parses the line back.

A template is text with ``{field:unit}`` placeholders and ``{[...]}`` sections that are rendered
only when every field inside them is set. Units say how a byte count is printed, and so how precise a
figure read back from such a line is: ``gib2`` is GiB with two decimals, ``gib1`` one decimal,
``kib`` whole KiB, ``mib1`` MiB with one decimal (sglang's ``MB`` of ``memory_reserved() / (1024 * 1024)``),
``mib0`` whole MiB rounded to nearest (sglang's ``%.0f MiB``),
``gb2`` decimal GB (host memory) with two decimals; ``f2`` is a plain number with two decimals (seconds).
Those are sglang's units, kept exactly. vLLM's: ``gib4`` is GiB printed with ``%.4f`` (exactly four
decimals are read, so that a later release's figure of the same wording falls to its own era);
``gib_round2`` is GiB as vLLM's ``format_gib`` prints it (0.14.0 on: ``round(bytes / 2**30, 2)`` printed
as a Python float, ``61.5``, ``0.0``, ``12.34``): whatever decimals the line shows, the figure hides the
rounding to two decimals, so its half-width is always 0.005 GiB;
``mib2`` is MiB with two decimals (vLLM's CUDA-graph estimates, ``%.2f`` of bytes / 2**20; sglang's ``%.2f MiB``);
``gib3`` is GiB with three decimals (sglang's ``%.3f GiB``);
``grouped`` is an integer printed with thousands separators (``f"{n:,}"``, ``1,234,567``; plain digits
are read too). kvlog's own lines use scaled units
(``kvlog.text.units``): ``iec`` bytes in B, KiB, ... EiB and ``us`` a duration in microseconds, each
printed in the unit that shows it, to 3 significant digits. A unit-less text slot takes one word, or a
phrase where a space and the template's own words follow it (``Capture {name} CUDA graph end.``):
servers interpolate phrases there, and those words end it. ``Template.parser`` compiles a template
into an anchored regular expression whose placeholders are typed captures and whose sections are
optional groups, so rendering and parsing cannot drift apart. Which templates are today's wording is
``kvlog.text.wording``'s business; old servers' wordings are data in ``migrations/sglang-text/``.

Parsing must stay linear on hostile input (a later check feeds 50 MB lines): the compiled expressions
are anchored, have no nested quantifiers, and bound every run of digits or text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Literal

from kvlog.text.units import BYTES, MICROSECONDS, Scale, half_width, whole_units

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10
MIB = 1 << 20
GB = 10**9

#: unit name -> (bytes per printed unit, decimals printed)
UNITS: dict[str, tuple[int, int]] = {
    "gib2": (GIB, 2),
    "gib1": (GIB, 1),
    "kib": (KIB, 0),
    "mib1": (MIB, 1),
    "mib0": (MIB, 0),
    "gb2": (GB, 2),
    "f2": (1, 2),
    "gib4": (GIB, 4),
    "gib_round2": (GIB, 2),
    "mib2": (MIB, 2),
    "gib3": (GIB, 3),
    "grouped": (1, 0),
}
#: unit name -> the scale it picks its printed unit from (kvlog's own lines)
SCALED: dict[str, Scale] = {"iec": BYTES, "us": MICROSECONDS}
#: units whose value is a byte count (an integer); the others print a plain number
BYTE_UNITS = frozenset({"gib2", "gib1", "kib", "mib1", "mib0", "gb2", "iec", "gib4", "gib_round2", "mib2", "gib3"})
#: ``{n:grouped}``: an integer with thousands separators, read with or without them
GROUPED = "grouped"
_GROUPED = "[0-9]{1,3}(?:,[0-9]{3}){1,6}|[0-9]{1,20}"
#: ``{x:gib_round2}``: vLLM's ``format_gib``, ``str(round(x / 2**30, 2))``; its half-width is the rounding's
GIB_ROUND2 = "gib_round2"
#: ``{x:gib4}``: ``%.4f`` GiB, exactly four decimals
_GIB4 = "[0-9]{1,15}[.][0-9]{4}"
#: ``{label:words}``: text that may hold spaces (``MiniMax MSA-v1 main NVFP4``), up to the template's next words
WORDS = "words"
_WORDS = "[^\\r\\n]{1,256}?"

#: ``{_}``: text a wording prints that no field of its event holds (the rest of a statistics line, which
#: every release and configuration words its own way), skipped up to the template's next words; a
#: template holding one reads lines and never renders one (its ``_`` is never set)
SKIP = "_"
_SKIP = "[^\\r\\n]{0,1024}?"

#: ``{field}`` or ``{field:unit}``
PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
SECTION_OPEN, SECTION_CLOSE = "{[", "]}"
_SECTION_MARK = re.compile(r"\{\[|\]\}")


@dataclass(frozen=True)
class Template:
    """One wording of one event, chosen when every ``when`` field of the event has the given value."""

    event: str
    text: str
    when: Mapping[str, Any] = field(default_factory=dict)
    #: fields the wording prints in parts (sglang's ``d=…GB, k=…GB, g=…GB`` of one set of ring buffers): each
    #: place's figure adds to the field, and so does its rounding. Such a wording reads lines, never renders one
    sums: frozenset[str] = frozenset()

    def matches(self, event: Mapping[str, Any]) -> bool:
        """Whether this wording applies to ``event``."""
        return event.get("event") == self.event and all(event.get(k) == v for k, v in self.when.items())

    def fits(self, event: Mapping[str, Any]) -> bool:
        """Whether this wording applies and can say everything it must: no required field is unset.

        A wording is never written with a missing value in it (Python would print ``None``); the
        next wording that fits says what the source said in that case.
        """
        return (
            not self.sums and self.matches(event) and all(event.get(name) is not None for name in _required(self.text))
        )

    def render(self, event: Mapping[str, Any]) -> str:
        """The line for ``event``; optional sections whose fields are unset are left out."""
        return _compiled(self.text)(event)

    def renderer(self) -> Callable[[Mapping[str, Any]], str]:
        """``render`` as one compiled function, for a caller that renders many events with it."""
        return _compiled(self.text)

    def required_fields(self) -> list[str]:
        """Fields outside every optional section: the line cannot be written without them."""
        return list(_required(self.text))

    def fields(self) -> list[str]:
        """Every field the template prints, in order (none in a literal wording: a placeholder opens with ``{``)."""
        return _fields_in(_sections(self.text)) if "{" in self.text else []

    def units(self) -> dict[str, str | None]:
        """The unit of each field (None when printed as is; a field printed twice: its last unit)."""
        return {m.group(1): m.group(2) for m in PLACEHOLDER.finditer(self.text)}

    def parser(self, syntax: Mapping[str, FieldSyntax]) -> TemplateParser:
        """Compile the template into a parser; ``syntax`` says how each unit-less field is written."""
        return TemplateParser(self, syntax)


@cache
def formatter(unit: str | None) -> Callable[[Any], str]:
    """The function that prints one field as the template's unit says, chosen once per unit, not per value."""
    if unit is None or unit == WORDS:
        return str
    if unit in SCALED:
        return SCALED[unit].format
    if unit == GROUPED:
        return lambda value: f"{value:,}"
    if unit == GIB_ROUND2:
        return lambda value: str(round(value / GIB, 2))
    per_unit, decimals = UNITS[unit]
    if unit == "kib":  # whole KiB are exact (granularities); ``mib0`` is rounded to nearest, as ``%.0f`` prints it
        return lambda value: str(value // per_unit)
    spec = f".{decimals}f"
    return lambda value: format(value / per_unit, spec)


def split_sections(text: str) -> list[str | list[Any]]:
    """Parse a template into literal/placeholder text and nested optional sections (lists)."""
    root: list[Any] = []
    stack = [root]
    position = 0
    for match in _SECTION_MARK.finditer(text):
        stack[-1].append(text[position : match.start()])
        if match.group() == SECTION_OPEN:
            section: list[Any] = []
            stack[-1].append(section)
            stack.append(section)
        elif len(stack) == 1:
            raise ValueError(f"unbalanced {SECTION_CLOSE} in template {text!r}")
        else:
            stack.pop()
        position = match.end()
    if len(stack) != 1:
        raise ValueError(f"unbalanced {SECTION_OPEN} in template {text!r}")
    root.append(text[position:])
    return root


@cache
def _sections(text: str) -> list[str | list[Any]]:
    """``split_sections`` once per template text (the console renders every event with it)."""
    return split_sections(text)


@cache
def _required(text: str) -> tuple[str, ...]:
    return tuple(name for part in _sections(text) if isinstance(part, str) for name in _names(part))


@cache
def _compiled(text: str) -> Callable[[Mapping[str, Any]], str]:
    """The renderer of a template text: its sections and units resolved once, into closures.

    The console renders every event it writes, and a server writes them on its hot path: walking the
    text's parts and choosing each unit's formatter per event cost twice what the rest of emitting a
    validated event costs. The renderer does exactly what the walk did (a section is written when
    every field in it, nested ones included, is set; a placeholder's field is looked up with
    ``event[name]``), from pieces built once; no text of a template is ever executed (migration files
    are read from pull requests; see ``_generated``).
    """
    return _renderer(_sections(text))


def compiled_fits(template: Template) -> Callable[[Mapping[str, Any]], bool]:
    """``template.fits`` for an event whose name is already known to be the template's, as one function."""
    when = tuple(template.when.items())
    required = _required(template.text)

    def fits(event: Mapping[str, Any]) -> bool:
        get = event.get  # a loop, not all() over a generator: this runs for every wording an event may have
        for name, value in when:
            if get(name) != value:
                return False
        for name in required:  # noqa: SIM110 - all() over a generator costs a frame per event
            if get(name) is None:
                return False
        return True

    return fits


def _renderer(parts: list[Any]) -> Callable[[Mapping[str, Any]], str]:
    """One f-string per event, with no Python loop: the layout of the sections the event sets.

    A section is written when every field in it is set, and a section nested in a written one has its
    fields set too: so which sections are written depends only on which of the sections' fields are
    None. For each such pattern the renderer makes, once, the flat layout of what is written (the
    literal text, a slot per placeholder, each field's formatter); an event then costs one look-up of
    its pattern and one call of its layout (every placeholder outside a section is read with
    ``event[name]``, as before: a missing one raises ``KeyError``).
    A layout depends on the template alone, never on a value, so nothing it holds can be stale. Both
    bounds are on what a hostile template or event stream can cost: a pattern past ``_MAX_LAYOUTS`` is
    laid out for its event alone, and one past ``_MAX_GENERATED_LAYOUTS`` walks its pieces rather
    than compiling code for a pattern that rare.
    """
    optional = tuple(dict.fromkeys(name for part in parts if isinstance(part, list) for name in _fields_in(part)))
    unset_of = kind_of((), optional)
    layouts: dict[tuple[bool, ...], Layout] = {}

    def render(event: Mapping[str, Any]) -> str:
        unset = unset_of(event.get)
        layout = layouts.get(unset)
        if layout is None:
            unset_names = {name for name, none in zip(optional, unset, strict=True) if none}
            # the patterns events show first are the common ones; compiling a rarer one costs more than it saves
            layout = _flat_layout(parts, unset_names, generate=len(layouts) < _MAX_GENERATED_LAYOUTS)
            if len(layouts) < _MAX_LAYOUTS:
                layouts[unset] = layout
        return layout(event)

    return render


#: layouts kept per template: one per pattern of unset optional fields that events actually show
_MAX_LAYOUTS = 256
#: of those, the first ones are generated code; the others walk their pieces
_MAX_GENERATED_LAYOUTS = 64
#: the most pieces (literal texts and slots) a generated layout has: compiling a function of n closure
#: variables costs time quadratic in n, and no wording comes near this (today's longest has 19)
MAX_GENERATED_PIECES = 256
#: the most field names a generated chooser (``kind_of``) reads, for the same reason
MAX_GENERATED_NAMES = 256


#: a flat layout: renders, as one call, an event whose unset optional fields are those it was made for
Layout = Callable[[Mapping[str, Any]], str]


def layout(text: str, unset: set[str]) -> Layout:
    """The flat layout of template ``text`` for an event whose fields in ``unset`` are None."""
    return _flat_layout(_sections(text), unset)


def _flat_layout(parts: list[Any], unset: set[str], *, generate: bool = True) -> Layout:
    """What ``parts`` writes when the fields in ``unset`` are None, as one function of the event.

    The literal text and a slot per placeholder, in order; every placeholder is read with
    ``event[name]`` (a missing one raises ``KeyError``), from left to right. The function is generated
    code (``_generated_layout``) when ``generate`` and the template is not too long to compile
    (``MAX_GENERATED_PIECES``), else it walks the pieces (``_walked_layout``); both write the same line.
    """
    pieces: list[str | tuple[str, str | None]] = []

    def walk(parts: list[Any]) -> None:
        for part in parts:
            if isinstance(part, str):
                position = 0
                for m in PLACEHOLDER.finditer(part):
                    pieces.extend((part[position : m.start()], (m.group(1), m.group(2))))
                    position = m.end()
                pieces.append(part[position:])
            elif unset.isdisjoint(_fields_in(part)):
                walk(part)

    walk(parts)
    if generate and len(pieces) <= MAX_GENERATED_PIECES:
        return _generated_layout(pieces)
    return _walked_layout(pieces)


def _walked_layout(pieces: list[str | tuple[str, str | None]]) -> Layout:
    """The layout of ``pieces`` as a loop over them, each slot printed by its unit's ``formatter``: nothing compiled."""
    steps = tuple(piece if isinstance(piece, str) else (piece[0], formatter(piece[1])) for piece in pieces)

    def render(event: Mapping[str, Any]) -> str:
        return "".join([step if isinstance(step, str) else step[1](event[step[0]]) for step in steps])

    return render


def _generated_layout(pieces: list[str | tuple[str, str | None]]) -> Layout:
    """One f-string over the event, of literal text and ``(field, unit)`` slots in order, as a generated function.

    A server renders a console line on its hot path, and ``str.format`` with a formatter call per
    value cost twice what one f-string does. No text of the template reaches the generated source
    (templates come from migration files, which are read from pull requests): the literal text, the
    field names and the formatters are arguments of the factory, bound as closure variables; the
    source holds only their positions (``l0``, ``n1``, ``w1``), the ``!s`` conversion and a decimal
    spec from ``UNITS``, kvlog's own table. A placeholder printed with a fixed number of decimals is
    the value divided by its unit, formatted with that spec (what ``formatter(unit)`` returns, inlined);
    a unit-less or text one is ``str(value)``; any other goes through its ``formatter``.
    """
    bound: dict[str, object] = {}
    source: list[str] = []
    for index, piece in enumerate(pieces):
        if isinstance(piece, str):
            if piece:
                bound[f"l{index}"] = piece
                source.append(f"{{l{index}}}")
            continue
        name, unit = piece
        bound[f"n{index}"] = name
        value = f"e[n{index}]"
        if unit is None or unit == WORDS:
            source.append(f"{{{value}!s}}")
        elif unit in UNITS and unit != GIB_ROUND2 and UNITS[unit][1]:
            per_unit, decimals = UNITS[unit]
            bound[f"p{index}"] = per_unit
            source.append(f"{{{value} / p{index}:.{int(decimals)}f}}")
        else:
            bound[f"w{index}"] = formatter(unit)
            source.append(f"{{w{index}({value})}}")
    render: Layout = _generated(bound, f"f'{''.join(source)}'")
    return render


def kind_of(values: tuple[str, ...], nones: tuple[str, ...]) -> Callable[[Callable[[str], Any]], tuple[Any, ...]]:
    """A function of an event's ``get``: the values of the fields ``values``, then whether each of ``nones`` is None.

    What a wording or a layout is chosen on, as one flat tuple made by one generated expression
    (building it with ``map`` cost a third of choosing); the field names are bound, never written
    into the source (see ``_generated``).
    """
    if len(values) + len(nones) > MAX_GENERATED_NAMES:  # too many names to compile: a loop over them
        return lambda e: (*map(e, values), *[e(name) is None for name in nones])
    bound = {f"n{index}": name for index, name in enumerate((*values, *nones))}
    items = [f"e(n{index})" for index in range(len(values))]
    items += [f"e(n{index}) is None" for index in range(len(values), len(bound))]
    return _generated(bound, f"({', '.join(items)},)" if items else "()")  # type: ignore[no-any-return]


def _generated(bound: Mapping[str, object], expression: str) -> Any:
    """``lambda e: <expression>`` with the names in ``bound`` as closure variables.

    The one place kvlog generates code, for the console's hot path (as ``dataclasses`` and
    ``namedtuple`` do). Its callers write the expression from the names of ``bound`` and kvlog's own
    tokens only: every text that came from a template or a migration file is a value in ``bound``, so
    nothing read from a file is ever executed; ``GENERATED_SOURCE`` refuses any other source.
    """
    source = f"def factory({', '.join(bound)}):\n    return lambda e: {expression}\n"
    if not GENERATED_SOURCE.fullmatch(source):  # enforced, not only promised: nothing else is ever compiled
        raise ValueError(f"not made of kvlog's own tokens: {source!r}")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<kvlog.text.template>", "exec"), namespace)  # the package's one exec: see above
    return namespace["factory"](**bound)


_SLOT = r"\{(?:l[0-9]+|e\[n[0-9]+\]!s|e\[n[0-9]+\] / p[0-9]+:\.[0-9]f|w[0-9]+\(e\[n[0-9]+\]\))\}"
_ITEM = r"e\(n[0-9]+\)(?: is None)?"
#: every source ``_generated`` may compile: positions, closure names and kvlog's tokens, no other character
GENERATED_SOURCE = re.compile(
    r"def factory\((?:[lnpw][0-9]+(?:, [lnpw][0-9]+)*)?\):\n    return lambda e: "
    rf"(?:f'(?:{_SLOT})*'|\(\)|\((?:{_ITEM}, )*{_ITEM},\))\n"
)


def _fields_in(parts: list[Any]) -> list[str]:
    names: list[str] = []
    for part in parts:
        names += _names(part) if isinstance(part, str) else _fields_in(part)
    return names


def _names(text: str) -> list[str]:
    return [m.group(1) for m in PLACEHOLDER.finditer(text)]


@dataclass(frozen=True)
class FieldSyntax:
    """How a unit-less field is written in a line: an integer, a number, or text (maybe one of ``choices``).

    ``nullable`` fields also accept ``None``, the way Python prints a missing value.
    """

    kind: Literal["integer", "number", "string"]
    choices: tuple[str, ...] = ()
    nullable: bool = False
    signed: bool = False


@dataclass(frozen=True)
class Parsed:
    """What a line said: typed field values, and for each rounded byte count its half-width in bytes."""

    fields: dict[str, Any]
    uncertainty_bytes: dict[str, int]
    rest: str = ""


_DIGITS = "[0-9]{1,20}"
_DECIMAL = "[0-9]{1,15}(?:[.][0-9]{1,20})?"
_NUMBER = "-?[0-9]{1,20}(?:[.][0-9]{1,20})?(?:e[-+]?[0-9]{1,3})?"
#: a number the schema keeps non-negative (a utilization, a duration): no sign is read, as none is printed
_UNSIGNED_NUMBER = _NUMBER[2:]
_TEXT_LIMIT = 1024
#: the longest message ``TemplateParser.cut`` looks at (a memory line is a few hundred characters)
_CUT_LIMIT = 4096
#: the fewest of a wording's own first words a cut line holds, when a slot comes before them
_CUT_MIN_WORDS = 8
#: after a text slot: a space, then the template's own words (not another slot, not the end). A server
#: interpolates phrases there (sglang's ``Capture {capture_name} CUDA graph end.``, ``target decode``):
#: the slot takes a phrase, up to the first place those words appear (``_phrase``); elsewhere it takes one
#: word, as a phrase there would have no words of the template to end it
_PHRASE_FOLLOWS = re.compile(r" +[^\s{]")


def _phrase(following: str) -> str:
    """A phrase slot's expression: up to 256 characters of a line not holding ``following``, the next words.

    So the phrase ends where those words first appear, and nowhere later: a line that says the
    words twice is not read with the first of them swallowed into the phrase (with the figure
    between them), as a lazy ``.*?`` would once the rest of the line failed after its first stop.
    """
    return f"(?:(?!{re.escape(following)})[^\\r\\n]){{1,256}}"


class TemplateParser:
    """A template compiled into an anchored regular expression with one typed capture per field."""

    def __init__(self, template: Template, syntax: Mapping[str, FieldSyntax]) -> None:
        self.template = template
        self._placed = 0
        #: a field printed twice (``{total_bytes:gib2} GB (={total_bytes} B)``) gets a capture per place
        self._captures: list[tuple[str, str | None, str]] = []  # (field, unit, the character after it)
        #: the text slots that take a phrase (see ``_PHRASE_FOLLOWS``), by place: the template's words after it
        self._phrases: dict[int, str] = {}
        if "{" not in template.text:  # a literal wording (most of known.toml's): no slot, no section, one start
            self._units: dict[str, str | None] = {}
            self._syntax: dict[str, FieldSyntax] = {}
            self.starts: tuple[str, ...] = (template.text,)
            self._needles: tuple[str, ...] = (template.text,)
            return
        self._units = template.units()
        self._syntax = {name: syntax.get(name, FieldSyntax("string")) for name in self._units}
        flat = _SECTION_MARK.sub("", template.text)
        skipped_to = -1  # where the last ``{_}`` ended: a slot right after one takes a word, the skip the rest
        for m in PLACEHOLDER.finditer(flat):
            unit = m.group(2)
            if unit is not None and unit not in UNITS and unit not in SCALED and unit != WORDS:
                known = ", ".join([*UNITS, *SCALED, WORDS])
                raise ValueError(f"unknown unit {unit!r} in template {template.text!r} (units: {known})")
            after_skip = skipped_to >= 0 and not flat[skipped_to : m.start()].strip()
            if m.group(1) == "_":
                skipped_to = m.end()
            if unit is None and not after_skip and _PHRASE_FOLLOWS.match(flat, m.end()):
                following = PLACEHOLDER.search(flat, m.end())
                self._phrases[len(self._captures)] = flat[m.end() : following.start() if following else len(flat)]
            self._captures.append((m.group(1), unit, flat[m.end()] if m.end() < len(flat) else ""))
        #: every way a matching message can begin ("" when any start is possible): a cheap first test
        sections = _sections(template.text)
        self.starts = tuple(sorted(self._starts(sections)))
        #: the text every matching message holds: the literal words outside the optional sections, which the
        #: expression escapes as they are. A message without one of them is no match, and asks for no expression
        #: to be compiled: most wordings a line's start lets through fail here (a log meets a few of them)
        self._needles = tuple(
            literal
            for part in sections
            if isinstance(part, str)
            for literal in PLACEHOLDER.split(part)[:: PLACEHOLDER.groups + 1]
            if literal
        )

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The expression, written and compiled on first use: most of the hundreds of wordings never meet a line.

        What can make a template wrong (unbalanced sections, an unknown unit) was checked when the parser was made.
        """
        self._placed = 0
        return re.compile(self._expression(_sections(self.template.text)), re.DOTALL)

    def parse(self, message: str, *, whole: bool = True) -> Parsed | None:
        """The fields of ``message`` if it is this template's wording (``whole=False``: if it starts with it)."""
        if not self._holds_needles(message):
            return None
        return self._read(self.pattern.fullmatch(message) if whole else self.pattern.match(message))

    def _holds_needles(self, message: str) -> bool:
        """Whether ``message`` holds every literal the template prints whatever its values (``_needles``)."""
        return all(needle in message for needle in self._needles)

    def cut(self, message: str) -> bool:
        """Whether ``message`` is this wording ended early: a proper beginning of one of its lines, not a whole one.

        A record cut in transit (a paste, a truncated file) is dead-lettered as such, and the line after
        it may complete it (``kvlog.migration.transit``). A figure at the very end of the
        message, without what the wording prints after it (``12.0`` of ``12.02 GiB``), is such a cut.
        """
        if len(message) > _CUT_LIMIT or self.pattern.fullmatch(message) is not None:
            return False
        return self._cut_pattern.fullmatch(message) is not None

    @cached_property
    def _cut_pattern(self) -> re.Pattern[str]:
        """Every beginning of a line of this wording (the empty one too), compiled on first use by ``cut``."""
        self._placed = 0
        return re.compile(self._beginnings(self._items(_sections(self.template.text))), re.DOTALL)

    def _items(self, parts: list[Any]) -> list[tuple[str, Any]]:
        """The template's parts as ``("text", literal)``, ``("slot", place)`` and ``("section", items)``, in order."""
        items: list[tuple[str, Any]] = []
        for part in parts:
            if isinstance(part, str):
                position = 0
                for m in PLACEHOLDER.finditer(part):
                    items += [("text", part[position : m.start()]), ("slot", self._placed)]
                    self._placed += 1
                    position = m.end()
                items.append(("text", part[position:]))
            else:
                items.append(("section", self._items(part)))
        return [item for item in items if item != ("text", "")]

    def _whole(self, items: list[tuple[str, Any]]) -> str:
        out = []
        for kind, value in items:
            if kind == "text":
                out.append(re.escape(value))
            elif kind == "slot":
                out.append(f"(?:{self._capture(value)})")
            else:
                out.append(f"(?:{self._whole(value)})?")
        return "".join(out)

    def _beginnings(self, items: list[tuple[str, Any]], entered: bool = False, *, after_phrase: bool = False) -> str:
        """An expression of every beginning of what ``items`` print: it ends inside the first, or goes on past it.

        A beginning holds some of the wording's own words (``entered``): one that ends inside a slot
        the wording begins with (``{label:words} KV Cache …``) would be every line. Nor does one end
        right after a phrase (``after_phrase``): a phrase takes any text, so that would be every line
        that begins as the wording does; nor right after a skipped value, which takes any text too.
        """
        if not items:
            return ""
        (kind, value), rest = items[0], items[1:]
        if kind == "text":
            shortest = 1 if after_phrase else 0 if entered else min(len(value), _CUT_MIN_WORDS)
            ends = "|".join(re.escape(value[:size]) for size in range(shortest, len(value)))
            going_on = f"{re.escape(value)}{self._beginnings(rest, True)}"
            return f"(?:{ends}|{going_on})" if ends else f"(?:{going_on})"
        if kind == "slot":
            # a skipped value (``{_}``) takes any text, as a phrase does
            loose = value in self._phrases or self._captures[value][0] == SKIP
            going_on = f"(?:{self._capture(value)}){self._beginnings(rest, entered, after_phrase=loose)}"
            beginning = self._slot_beginning(value) if entered else None
            return f"(?:{beginning}|{going_on})" if beginning is not None else f"(?:{going_on})"
        inside = self._beginnings(value, entered)
        past = f"(?:{self._whole(value)}){self._beginnings(rest, entered or _has_text(value))}"
        return f"(?:{inside}|{past}|{self._beginnings(rest, entered)})"

    def _slot_beginning(self, place: int) -> str | None:
        """What the beginning of a slot's value may look like: a figure's digits so far, a word's letters.

        None for a phrase or a skipped value: any text begins one, so a line ending inside it is not told
        from any other.
        """
        name, unit, stop = self._captures[place]
        if unit == WORDS or place in self._phrases or name == SKIP:
            return None
        if unit in SCALED:
            return "[0-9.]{0,40}(?: ?[A-Za-z]{0,3})?"
        syntax = self._syntax[name]
        if unit is not None or (syntax.kind != "string" and not syntax.choices):
            return "-?[0-9.,e+]{0,40}"
        excluded = r"\s" if not stop or stop.isspace() else re.escape(stop) + r"\r\n"
        return f"[^{excluded}]{{0,{_TEXT_LIMIT}}}"

    def parse_glued(self, message: str, follower: re.Pattern[str]) -> Parsed | None:
        """The fields of ``message`` if it is this template's wording followed by text ``follower`` matches."""
        match = self.pattern.match(message) if self._holds_needles(message) else None
        if match is None or match.end() == len(message) or follower.match(message, match.end()) is None:
            return None
        parsed = self._read(match)
        return None if parsed is None else Parsed(parsed.fields, parsed.uncertainty_bytes, message[match.end() :])

    def _read(self, match: re.Match[str] | None) -> Parsed | None:
        if match is None:
            return None
        fields: dict[str, Any] = {}
        uncertainty: dict[str, int] = {}
        for (name, unit, _), raw in zip(self._captures, match.groups(), strict=True):
            if raw is None or name == SKIP:
                continue
            if unit is not None and unit != WORDS:
                value, spread = read_figure(raw, unit)
            else:
                value, spread = _read_plain(raw, self._syntax[name]), 0
            if isinstance(value, float) and not math.isfinite(value):
                return None  # ``1e400``, ``2e603 ms``: no JSON number holds it, so no event of this wording says it
            if name in fields and name in self.template.sums:
                value, spread = fields[name] + value, spread + uncertainty.get(name, 0)  # parts, and their roundings
            elif name in fields and uncertainty.get(name, 0) <= spread:
                continue  # printed twice: the more precise figure stands (``(=N B)`` over ``X.XX GB``)
            fields[name] = value
            if spread:
                uncertainty[name] = spread
            else:
                uncertainty.pop(name, None)
        return Parsed(fields, uncertainty)

    def _expression(self, parts: list[Any]) -> str:
        out: list[str] = []
        for part in parts:
            if isinstance(part, str):
                position = 0
                for m in PLACEHOLDER.finditer(part):
                    out.append(re.escape(part[position : m.start()]))
                    out.append(f"({self._capture(self._placed)})")
                    self._placed += 1
                    position = m.end()
                out.append(re.escape(part[position:]))
            else:
                out.append(f"(?:{self._expression(part)})?")
        return "".join(out)

    def _starts(self, parts: list[Any]) -> set[str]:
        if not parts:
            return {""}
        head, rest = parts[0], parts[1:]
        if isinstance(head, list):
            return self._starts(head + rest) | self._starts(rest)
        placeholder = PLACEHOLDER.search(head)
        if placeholder is None:
            return {head} if head else self._starts(rest)
        if placeholder.start() > 0:
            return {head[: placeholder.start()]}
        syntax = self._syntax[placeholder.group(1)]
        if self._units[placeholder.group(1)] is None and syntax.choices:
            return set(syntax.choices) | ({"None"} if syntax.nullable else set())
        return {""}

    def _capture(self, place: int) -> str:
        name, unit, stop = self._captures[place]
        if name == SKIP:
            return _SKIP
        if unit == WORDS:
            return f"{_WORDS}|None" if self._syntax[name].nullable else _WORDS
        if unit in SCALED:
            return ("-?" if self._syntax[name].signed else "") + SCALED[unit].pattern
        if unit == GROUPED:
            return _GROUPED
        if unit == "gib4":
            return ("-?" if self._syntax[name].signed else "") + _GIB4
        if unit is not None:  # signed where the schema lets the figure be negative (a difference the server prints)
            return ("-?" if self._syntax[name].signed else "") + (_DIGITS if UNITS[unit][1] == 0 else _DECIMAL)
        syntax = self._syntax[name]
        if syntax.choices:
            body = "|".join(re.escape(c) for c in sorted(syntax.choices, key=len, reverse=True))
        elif syntax.kind == "integer":
            body = f"-?{_DIGITS}" if syntax.signed else _DIGITS
        elif syntax.kind == "number":
            body = _NUMBER if syntax.signed else _UNSIGNED_NUMBER
        elif place in self._phrases:
            body = _phrase(self._phrases[place])
        else:
            excluded = r"\s" if not stop or stop.isspace() else re.escape(stop) + r"\r\n"
            body = f"[^{excluded}]{{1,{_TEXT_LIMIT}}}"
        return f"{body}|None" if syntax.nullable else body


def _has_text(items: list[tuple[str, Any]]) -> bool:
    """Whether ``TemplateParser._items`` hold any of the wording's own words (outside a nested section too)."""
    return any(kind == "text" or (kind == "section" and _has_text(value)) for kind, value in items)


def read_figure(text: str, unit: str) -> tuple[int | float, int]:
    """A printed figure in ``unit`` -> (value, half-width in bytes of what its rounding hides).

    Byte units give whole bytes, rounded to nearest; the half-width follows the decimals actually
    printed (``54.12`` GiB: 0.005 GiB, rounded up to a whole byte), except ``gib_round2``'s, which is
    always 0.005 GiB (``61.5`` was rounded to two decimals too). Integer KiB are exact: sglang prints
    granularities, which are whole KiB; ``grouped`` integers are exact.
    """
    if unit in SCALED:
        return SCALED[unit].read(text)
    if unit == GROUPED:
        return int(text.replace(",", "")), 0
    if unit not in BYTE_UNITS:
        return float(text), 0
    per_unit = UNITS[unit][0]
    value, decimals = whole_units(text, per_unit)
    if unit == "kib":
        return value, 0
    return value, half_width(per_unit, UNITS[unit][1] if unit == GIB_ROUND2 else decimals)


def _read_plain(text: str, syntax: FieldSyntax) -> Any:
    if syntax.nullable and text == "None":
        return None
    if syntax.kind == "integer" and not syntax.choices:
        return int(text)
    if syntax.kind == "number" and not syntax.choices:
        return float(text)
    return text
