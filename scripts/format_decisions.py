"""What kvlog does with every memory format a server ever released: decisions, sample lines, FORMATS.md.

``scripts/harvest_formats.py`` reads every release of sglang and vLLM and writes each distinct
memory-related log format to ``formats/<server>.json``. This tool holds each of them to a decision,
written in ``formats/<server>.decisions.toml`` as rules (the first rule whose ``match`` finds the format text
decides it):

- ``event``: the format becomes that kvlog event (a migration template reads it);
- ``known``: kvlog recognises it and deliberately makes no event of it, for the reason given (its
  lines are listed, generated from the harvested text, in ``migrations/<server>-text/known.toml``);
- ``not_memory``: not a memory line of a server log kvlog reads (no figure of memory, a benchmark's
  console output, another pipeline), for the reason given.

It also writes, from the harvested format strings, the sample lines the tests migrate (with the
line prefix sglang printed in the era of the release), ``FORMATS.md`` (the table of every format
and its decision) and the ``known.toml`` files. A maintainer tool, not part of kvlog:

    .venv/bin/python scripts/format_decisions.py --write    # regenerate FORMATS.md and known.toml
    .venv/bin/python scripts/format_decisions.py --check    # exit 1 when they are out of date
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kvlog.migration.candidates import carries_memory_figure

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ROOT / "formats"
TABLE = ROOT / "FORMATS.md"
SERVERS = ("sglang", "vllm")
KINDS = ("event", "known", "not_memory")
#: a placeholder of a known line's template matches one word-like run (its stop character excluded)
_KNOWN_MIN_LITERAL = 20
#: the longest line ruff formats on one line (pyproject.toml)
_LINE_LENGTH = 120


@dataclass(frozen=True)
class Rule:
    """One decision of ``formats/decisions.toml``."""

    server: str
    match: re.Pattern[str]
    kind: str
    value: str  # the event, or the reason
    files: re.Pattern[str] | None = None
    host: bool = False  # its "GB" are decimal (host memory), not GiB
    samples: tuple[str, ...] = ()  # messages written by hand where the generator cannot
    without_figure: bool = False  # applies only to formats whose lines carry no figure of memory
    levels: tuple[str, ...] = ()  # applies only to formats logged at these levels (``print``: not logged)


@dataclass(frozen=True)
class Format:
    """One harvested format of one server."""

    server: str
    id: str
    text: str
    style: str
    args: tuple[str, ...]
    level: str
    files: tuple[str, ...]
    first: str
    last: str
    first_index: int
    last_index: int
    first_date: str = ""


@dataclass(frozen=True)
class Placeholder:
    """One value a format interpolates: its expression source, format spec and conversion."""

    expression: str
    spec: str = ""
    conversion: str = ""


@dataclass
class Sample:
    """A line written from a format, and the memory figures in it: (printed number, unit, bytes per unit)."""

    line: str
    figures: list[tuple[str, str, int]] = field(default_factory=list)
    exact: list[int] = field(default_factory=list)
    #: the message's other lines, where it prints several (each behind the prefix of its own, as a logger writes it)
    more: list[str] = field(default_factory=list)

    def expected_bytes(self) -> list[int]:
        """Each figure as the bytes it stands for (rounded half to even, as kvlog reads it)."""
        out = [int((Decimal(text) * per_unit).to_integral_value(ROUND_HALF_EVEN)) for text, _, per_unit in self.figures]
        return out + self.exact


# -- loading -----------------------------------------------------------------------------------------


def load_formats(server: str) -> list[Format]:
    """The harvested formats of ``server``."""
    data = json.loads((FORMATS / f"{server}.json").read_text(encoding="utf-8"))
    order = {release: index for index, release in enumerate(data["releases"])}
    return [
        Format(
            server=server,
            id=f["id"],
            text=f["format"],
            style=f["style"],
            args=tuple(f["args"]),
            level=f["level"],
            files=tuple(f["files"]),
            first=f["first"],
            last=f["last"],
            first_index=order[f["first"]],
            last_index=order[f["last"]],
            first_date=f["first_date"],
        )
        for f in data["formats"]
    ]


def load_rules() -> list[Rule]:
    """The decisions of every server, in the order they are tried."""
    rules: list[Rule] = []
    for server in SERVERS:
        path = FORMATS / f"{server}.decisions.toml"
        document = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        for spec in document.get("rule", []):
            kinds = [kind for kind in KINDS if kind in spec]
            if len(kinds) != 1:
                raise ValueError(f"{path}: a rule has exactly one of {', '.join(KINDS)}: {spec!r}")
            files = spec.get("files")
            rules.append(
                Rule(
                    server=server,
                    match=re.compile(spec["match"], re.DOTALL),
                    kind=kinds[0],
                    value=spec[kinds[0]],
                    files=re.compile(files) if files else None,
                    host=bool(spec.get("host", False)),
                    samples=tuple(spec.get("samples", ())),
                    without_figure=bool(spec.get("without_figure", False)),
                    levels=tuple(spec.get("levels", ())),
                )
            )
    return rules


def decide(fmt: Format, rules: list[Rule]) -> Rule | None:
    """The first rule that decides ``fmt``."""
    for rule in rules:
        if rule.server != fmt.server or rule.match.search(fmt.text) is None:
            continue
        if rule.files is not None and not any(rule.files.search(path) for path in fmt.files):
            continue
        if rule.levels and fmt.level not in rule.levels:
            continue
        if rule.without_figure and any(carries_memory_figure(_render("", fmt, rule, v).line) for v in (0, 1)):
            continue
        return rule
    return None


# -- reading a format string ------------------------------------------------------------------------------

_PERCENT = re.compile(r"%(?:\((\w+)\))?([-+ #0]*)(\d*)(?:\.(\d+))?([sdifrxXeEgGc%])")


def pieces(fmt: Format) -> list[str | Placeholder]:
    """The format as literal text and placeholders, whatever its style."""
    if fmt.style == "fstring":
        return _fstring_pieces(fmt.text)
    if fmt.style == "percent":
        out: list[str | Placeholder] = []
        position, args = 0, iter(fmt.args)
        for match in _PERCENT.finditer(fmt.text):
            out.append(fmt.text[position : match.start()])
            if match.group(5) == "%":
                out.append("%")
            else:
                precision = f".{match.group(4)}" if match.group(4) is not None else ""
                out.append(Placeholder(next(args, match.group(1) or ""), f"{precision}{match.group(5)}"))
            position = match.end()
        out.append(fmt.text[position:])
        return [piece for piece in out if piece != ""]
    if fmt.style == "format":
        out = []
        args = iter(fmt.args)
        for piece in _fstring_pieces(fmt.text):
            positional = (
                Placeholder(next(args, ""), piece.spec, piece.conversion) if isinstance(piece, Placeholder) else piece
            )
            out.append(positional)
        return out
    return [fmt.text]


def _fstring_pieces(text: str) -> list[str | Placeholder]:
    """Split ``a {expr!r:spec} b`` (expressions may hold quotes, brackets and nested braces)."""
    out: list[str | Placeholder] = []
    literal: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char in "{}" and text[index : index + 2] in ("{{", "}}"):
            literal.append(char)
            index += 2
            continue
        if char != "{":
            literal.append(char)
            index += 1
            continue
        close = next((p for p, c, depth in _outside_quotes(text, index + 1) if c == "}" and depth == 0), len(text))
        end = close + 1
        body = text[index + 1 : close]
        out.append("".join(literal))
        literal = []
        out.append(_placeholder(body))
        index = end
    out.append("".join(literal))
    return [piece for piece in out if piece != ""]


def _outside_quotes(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """Each character of ``text`` from ``start`` that is outside string literals, with the bracket depth before it."""
    depth, quote = 0, ""
    for position in range(start, len(text)):
        char = text[position]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        else:
            yield position, char, depth
            depth += (char in "{[(") - (char in "}])")


def _placeholder(body: str) -> Placeholder:
    """``expr!r:spec`` -> its parts; a colon inside brackets or quotes belongs to the expression."""
    split = next(
        (p for p, c, depth in _outside_quotes(body) if c == ":" and depth == 0 and not body.startswith(":=", p)),
        len(body),
    )
    expression, spec = body[:split], body[split + 1 :]
    conversion = ""
    if re.search(r"![rsa]$", expression):
        expression, conversion = expression[:-2], expression[-1]
    return Placeholder(expression.strip(), spec, conversion)


# -- writing sample lines -----------------------------------------------------------------------------------

#: (variant 0, variant 1) values by what an expression's source says it holds
_CONDITIONAL = re.compile(r"^(?P<a>'[^']*'|\"[^\"]*\"|[\w.]+(?: \+ '[^']*')?) if .+ else (?P<b>'[^']*'|\"[^\"]*\")$")
_INTEGER_HINT = re.compile(
    r"size|token|num|len\(|_len\b|count|max|slot|page|layer|rank|_id\b|\bid\b|bs\b|reqs|_req|steps|step\b|pid|device|index|capacity|limit",
    re.I,
)
_FLOAT_HINT = re.compile(r"mem|_gb\b|GB|gib|usage|ratio|fraction|elapsed|time|sec", re.I)
_PREFIX_ERAS = (  # sglang: (first release index at which the prefix applies, prefix of variant 0, of variant 1)
    ("0.3.4", "[2025-01-02 10:00:05 TP0] ", "[2026-10-30 23:59:58 DP1 TP3] "),
    ("0.2.14", "[10:00:05 TP0] ", "[23:59:58 TP3] "),
    ("0.0.0", "", ""),
)


def samples(fmt: Format, rule: Rule, releases: list[str]) -> list[Sample]:
    """Sample lines of ``fmt``: with its first and its last era's prefix, and different values (or the rule's own)."""
    if rule.samples:
        return [_with_figures(_prefix(fmt, releases, v), message, rule) for v in (0, 1) for message in rule.samples]
    return [_render(_prefix(fmt, releases, v), fmt, rule, v) for v in (0, 1)]


#: vLLM: ``%(levelname)s %(asctime)s %(filename)s:%(lineno)d] `` before 0.8.0, then the file in brackets,
#: behind the process tag that multi-process engines print (0.8 on, in the format itself from 0.34)
_VLLM_ERAS = (
    (
        "0.8.0",
        "(VllmWorker rank=0 pid=4242) {level} 06-01 10:00:05 [gpu_worker.py:123] ",
        "(EngineCore_DP1 pid=4243) {level} 10-30 23:59:58 [v1/worker/gpu_worker.py:276] ",
    ),
    ("0.0.0", "{level} 06-01 10:00:05 llm_engine.py:123] ", "{level} 10-30 23:59:58 worker.py:276] "),
)
#: a raised message (level ``raise``) is printed where the engine logs its failure, at ERROR
_VLLM_LEVELS = {
    "warning": "WARNING",
    "warn": "WARNING",
    "error": "ERROR",
    "exception": "ERROR",
    "debug": "DEBUG",
    "raise": "ERROR",
}


def _prefix(fmt: Format, releases: list[str], variant: int) -> str:
    """The line prefix the server printed in the era of the format's first (0) or last (1) release."""
    release_index = fmt.first_index if variant == 0 else fmt.last_index
    eras = _PREFIX_ERAS if fmt.server == "sglang" else _VLLM_ERAS
    for first, zero, one in eras:
        if first == "0.0.0" or release_index >= releases.index(first):
            level = _VLLM_LEVELS.get(fmt.level.removesuffix("_once"), "INFO")
            return (zero if variant == 0 else one).format(level=level)
    return ""


def _render(prefix: str, fmt: Format, rule: Rule, variant: int) -> Sample:
    sample = Sample(prefix)
    parts = pieces(fmt)
    text: list[str] = []
    for position, piece in enumerate(parts):
        if isinstance(piece, str):
            text.append(piece)
            continue
        after = next((p for p in parts[position + 1 :] if isinstance(p, str)), "")
        value = _value(piece, after, variant)
        text.append(value)
        unit = _unit_after(after)
        if unit is not None and re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", value):
            sample.figures.append((value, unit, _bytes_per_unit(unit, piece.expression, rule)))
        elif re.match(r" B\)", after) and value.isdigit():
            sample.exact.append(int(value))
    message, *more = "".join(text).split("\n")
    sample.line = prefix + message
    sample.more = [prefix + line for line in more if line.strip()]
    return sample


def _with_figures(prefix: str, message: str, rule: Rule) -> Sample:
    """A hand-written message: its figures are every number followed by a unit."""
    sample = Sample(prefix + message)
    for match in re.finditer(r"([0-9]+(?:\.[0-9]+)?) ?(GiB|GB|MiB|MB|KiB|KB)\b", message):
        sample.figures.append((match.group(1), match.group(2), _bytes_per_unit(match.group(2), "", rule)))
    return sample


def _unit_after(after: str) -> str | None:
    match = re.match(r" ?(GiB|GB|MiB|MB|KiB|KB)\b", after)
    return match.group(1) if match else None


def _bytes_per_unit(unit: str, expression: str, rule: Rule) -> int:
    """What one printed unit is, from the unit and how the expression divided (sglang's GB is 1 << 30)."""
    decimal = rule.host or re.search(r"1000000000|1e9|1e\+09|10 \*\* 9|1000 \*\* 3", expression) is not None
    if unit in ("GiB", "MiB", "KiB") or not decimal:
        return {"GiB": 1 << 30, "GB": 1 << 30, "MiB": 1 << 20, "MB": 1 << 20, "KiB": 1 << 10, "KB": 1 << 10}[unit]
    return {"GB": 10**9, "MB": 10**6, "KB": 10**3}[unit]


def _value(placeholder: Placeholder, after: str, variant: int) -> str:
    """A plausible printed value for one placeholder (variant 0: large figures, variant 1: small)."""
    expression, spec = placeholder.expression, placeholder.spec
    conditional = _CONDITIONAL.match(expression)
    if conditional is not None:
        chosen = conditional.group("a") if variant == 0 else conditional.group("b")
        if chosen.startswith(("'", '"')):
            return chosen[1:-1]
        return "quant=fp8, " if "quant" in chosen else "x, "
    kind = spec[-1:] if spec[-1:] in "dfs" else ""
    precision = re.search(r"\.(\d+)", spec)
    if kind == "f" or (precision and kind != "s"):
        digits = int(precision.group(1)) if precision else 6
        return f"{(37.421875 if variant == 0 else 0.625):.{digits}f}"
    if kind == "d":
        return "812345" if variant == 0 else "4096"
    if "dtype" in expression:
        return "torch.bfloat16" if variant == 0 else "torch.float8_e4m3fn"
    if expression == "cache_name":
        return "KV Cache" if variant == 0 else "SWA KV Cache"
    if "__name__" in expression or expression.startswith("type("):
        return "LlamaForCausalLM" if variant == 0 else "DeepseekV3ForCausalLM"
    if "label" in expression or expression.endswith("name"):
        return "Full" if variant == 0 else "draft"
    if _unit_after(after) is not None or (_FLOAT_HINT.search(expression) and not _INTEGER_HINT.search(expression)):
        return "34.7344970703125" if variant == 0 else "0.5"
    if _INTEGER_HINT.search(expression):
        return "812345" if variant == 0 else "4096"
    return "abc" if variant == 0 else "xyz"


# -- known.toml and FORMATS.md ------------------------------------------------------------------------------


def known_texts(fmt: Format) -> list[str]:
    """The starts of a known format's lines, in kvlog's template language: literal text, each value one capture.

    Long enough to be specific (``_KNOWN_MIN_LITERAL`` literal characters), cut at the first line break;
    a value chosen between literal alternatives (``{'a' if x else 'b'}``) gives one start per alternative.
    A rank tag that opened old sglang messages (``[gpu_id=N] ``) is the prefix's, not the message's.
    A raised message (level ``raise``, ``ValueError: …``) is pasted with its exception's name, as the
    traceback's last line prints it, or without: it starts both ways.
    """
    starts = _known_starts(fmt)
    if fmt.level == "raise":
        unnamed = [text.partition(": ") for text in starts]
        starts += [rest for _, colon, rest in unnamed if colon and len(rest) >= _KNOWN_MIN_LITERAL]
    return starts


def _known_starts(fmt: Format) -> list[str]:
    texts = [""]
    literal = 0
    captures = 0
    parts = pieces(fmt)
    if (
        fmt.server == "sglang"
        and parts
        and isinstance(parts[0], str)
        and re.fullmatch(r"\[(gpu_id|gpu|rank)=", parts[0])
    ):
        parts = parts[2:]
        if parts and isinstance(parts[0], str):
            parts[0] = parts[0].removeprefix("] ")
    for piece in parts:
        if isinstance(piece, Placeholder):
            if literal >= _KNOWN_MIN_LITERAL:
                break
            conditional = _CONDITIONAL.match(piece.expression)
            branches = [conditional.group(g) for g in ("a", "b")] if conditional else []
            if branches and all(branch[:1] in ("'", '"') for branch in branches):
                choices = [branch[1:-1] for branch in branches]
                texts = [text + choice for text in texts for choice in choices]
                literal += min(len(choice) for choice in choices)
            else:
                texts = [f"{text}{{v{captures}}}" for text in texts]
                captures += 1
            continue
        text = piece.split("\n", 1)[0]
        texts = [t + text for t in texts]
        literal += len(text.strip())
        if "\n" in piece:
            break
    return [re.sub(r"(\{v[0-9]+\})+$", "", text).rstrip() for text in texts]


def decisions(server: str) -> Iterator[tuple[Format, Rule | None]]:
    rules = load_rules()
    for fmt in load_formats(server):
        yield fmt, decide(fmt, rules)


def render_known(server: str) -> str:
    """``migrations/<server>-text/known.toml``: the starts of every known format's lines, grouped by reason."""
    by_reason: dict[str, set[str]] = {}
    for fmt, rule in decisions(server):
        if rule is not None and rule.kind == "known":
            by_reason.setdefault(rule.value, set()).update(text for text in known_texts(fmt) if text)
    lines = [
        "# Generated by scripts/format_decisions.py from formats/"
        f"{server}.json and formats/{server}.decisions.toml: do not edit (FORMATS.md names each format).",
        'description = """',
        f"Memory lines {server} prints that kvlog knows and deliberately makes no event of, grouped by the reason.",
        "They are recognised by how they begin, after every era's wordings were tried, so that `--strict`",
        'does not fail on them and `--report` counts them as companions ("known").',
        '"""',
    ]
    for reason, texts in sorted(by_reason.items()):
        lines += ["", "[[known]]", f"reason = {_toml_string(reason)}", "texts = ["]
        lines += [f"  {_toml_string(text)}," for text in sorted(texts)]
        lines.append("]")
    return "\n".join(lines) + "\n"


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def render_table() -> str:
    """FORMATS.md: every harvested format, its file and releases, and what kvlog makes of it."""
    lines = [
        "# Every memory format sglang and vLLM released",
        "",
        "Generated by `scripts/format_decisions.py` from the harvest (`formats/<server>.json`, written by",
        "`scripts/harvest_formats.py` from every release on PyPI) and the decisions in",
        "`formats/<server>.decisions.toml`: do not edit. **event**: the kvlog event a line of the format becomes;",
        "**known**: recognised and deliberately no event; **not memory**: not a memory line kvlog reads.",
        "",
    ]
    for server in SERVERS:
        rows = list(decisions(server))
        counts = {kind: sum(1 for _, rule in rows if rule and rule.kind == kind) for kind in KINDS}
        lines += [
            f"## {server}",
            "",
            f"{len(rows)} formats: {counts['event']} events, {counts['known']} known, "
            f"{counts['not_memory']} not memory, {sum(1 for _, r in rows if r is None)} undecided.",
            "",
            "| format | file | releases | kvlog |",
            "| --- | --- | --- | --- |",
        ]
        for fmt, rule in rows:
            decision = "**undecided**" if rule is None else _decision_cell(rule)
            text = fmt.text.replace("\n", "\\n").replace("|", "\\|")
            if len(text) > 160:
                text = text[:157] + "…"
            files = "<br>".join(path.replace("|", "\\|") for path in fmt.files[:2])
            if len(fmt.files) > 2:
                files += f" (+{len(fmt.files) - 2})"
            lines.append(f"| `{text}` | {files} | {fmt.first} – {fmt.last} | {decision} |")
        lines.append("")
    return "\n".join(lines)


def _decision_cell(rule: Rule) -> str:
    if rule.kind == "event":
        return f"event `{rule.value}`"
    return f"{'known' if rule.kind == 'known' else 'not memory'}: {rule.value}"


def wording_windows(server: str) -> dict[str, dict[str, tuple[str, str, str | None]]]:
    """When each template of kvlog's migrations was printed: by generation, by template text, a window.

    A window is (the last release that printed no line the template reads, its date, the date of the first
    release after it that printed none any more, None while the newest still does): the union of the windows
    of the harvested formats whose sample lines the template reads, the migrator's own reading deciding
    which (a known format's lines too: a message printed as several lines may hold events' wordings, and
    its ``known.toml`` starts read the rest). Its start is the release before the first that prints a
    wording, since the development builds after it (``0.7.4.dev390+g…``) print it too.
    """
    from kvlog.migration import load_chain  # noqa: PLC0415 - the migrator only for this table
    from kvlog.migration.engine import Family  # noqa: PLC0415
    from kvlog.migration.release_dates import RELEASE_DATES  # noqa: PLC0415

    data = json.loads((FORMATS / f"{server}.json").read_text(encoding="utf-8"))
    releases, dates = data["releases"], dict(RELEASE_DATES[server])
    family = Family.of(load_chain(), server, usage=True)
    windows: dict[str, dict[str, tuple[str, str, str | None]]] = {}
    for fmt, rule in decisions(server):
        if rule is None or rule.kind == "not_memory" or fmt.first_index == 0:
            continue  # a wording of the first release: nothing before it bounds its lines
        keys = [(f"{server}-text/known", text) for text in known_texts(fmt) if text] if rule.kind == "known" else []
        for sample in samples(fmt, rule, releases):  # a known format's other lines may be events' wordings
            for line in (sample.line, *sample.more):
                read = family.recognise(family.prefix.split(line).message)
                if read is not None:
                    keys.append((read.generation.id, read.rule.template.text))
        before = releases[fmt.first_index - 1]
        after = releases[fmt.last_index + 1] if fmt.last_index + 1 < len(releases) else None
        start = (before, dates.get(before, fmt.first_date))
        ended = dates.get(after) if after is not None else None
        for generation, text in keys:
            seen = windows.setdefault(generation, {}).get(text)
            window = (*start, ended)
            if seen is not None:
                ends = None if seen[2] is None or ended is None else max(ended, seen[2])
                window = (*min(start, seen[:2], key=lambda pair: pair[1]), ends)
            windows[generation][text] = window
    return windows


def render_wording_windows() -> str:
    """``kvlog/migration/wording_windows.py``: ``wording_windows`` of every server, as a Python table."""
    lines = [
        '"""When each wording kvlog reads was printed: generated by ``scripts/format_decisions.py``, do not edit.',
        "",
        "By generation, by template text: (the last release that printed no line it reads, that release's date,",
        "the date of the first release after it that prints none any more, or None while the newest still does).",
        "From the harvest (``formats/<server>.json``): a line is not older than the development builds that",
        "followed the release before the first whose code prints it (``kvlog.migration.dating``).",
        '"""',
        "",
        "# ruff: noqa: E501 - a wording is one string, however long",
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from typing import Final",
        "",
        "WORDING_WINDOWS: Final[Mapping[str, Mapping[str, tuple[str, str, str | None]]]] = {",
    ]
    for server in SERVERS:
        for generation, texts in sorted(wording_windows(server).items()):
            lines.append(f"    {json.dumps(generation)}: {{")
            for text, (before, since, ended) in sorted(texts.items()):
                values = [json.dumps(before), json.dumps(since), "None" if ended is None else json.dumps(ended)]
                key = f"        {_python_string(text)}: "
                one_line = f"{key}({', '.join(values)}),"
                if len(one_line) <= _LINE_LENGTH:  # as ruff formats it, which the checks hold it to
                    lines.append(one_line)
                else:
                    lines += [f"{key}(", *(f"            {value}," for value in values), "        ),"]
            lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _python_string(text: str) -> str:
    """``text`` as a Python literal, quoted as ruff formats it: single quotes where that escapes no double quote."""
    quoted = json.dumps(text, ensure_ascii=False)
    if '"' in text and "'" not in text:
        return "'" + quoted[1:-1].replace('\\"', '"') + "'"
    return quoted


def generated() -> dict[Path, str]:
    """Every file this tool writes, with its content."""
    out = {TABLE: render_table()}
    for server in SERVERS:
        known = render_known(server)
        if known.count("[[known]]"):
            out[ROOT / "migrations" / f"{server}-text" / "known.toml"] = known
    out[ROOT / "kvlog" / "migration" / "wording_windows.py"] = render_wording_windows()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="regenerate FORMATS.md and the known.toml files")
    action.add_argument("--check", action="store_true", help="exit 1 when a generated file is out of date")
    action.add_argument("--undecided", choices=SERVERS, help="list the formats of a server that no rule decides")
    args = parser.parse_args(argv)
    if args.undecided:
        rows = [fmt for fmt, rule in decisions(args.undecided) if rule is None]
        for fmt in rows:
            text = fmt.text.replace("\n", "\\n")
            print(
                f"{fmt.id} {fmt.first}..{fmt.last} {fmt.level} {','.join(fmt.files)[:60]} | {text[:200]} | {fmt.args}"
            )
        print(f"{len(rows)} undecided", file=sys.stderr)
        return 1 if rows else 0
    files = generated()
    stale = [path for path, text in files.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run scripts/format_decisions.py --write", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
