"""A wording renders the same line however it is made fast (issue 15 part 3).

The console renders every event a server writes, on its hot path, so a template's renderer keeps one
flat layout per pattern of unset optional fields, and an event name's wordings are looked up by the
values they are chosen on. Neither may change a line: here every wording of today's, with random
subsets of its fields set, renders exactly what walking the template's text writes (a section when
all its fields are set, each placeholder in its unit), including templates with more patterns than
the renderer keeps; and an event whose choosing value cannot be looked up still gets its line.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlog.text import template as template_module
from kvlog.text.console import console_line
from kvlog.text.template import PLACEHOLDER, Template, formatter, split_sections
from kvlog.text.wording import CURRENT, render_message


def walked(parts: list[Any], event: Mapping[str, Any]) -> str:
    """What a template writes, read off its text: the reference the compiled renderer must agree with."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(PLACEHOLDER.sub(lambda m: formatter(m.group(2))(event[m.group(1)]), part))
        elif all(event.get(name) is not None for name in fields_in(part)):
            out.append(walked(part, event))
    return "".join(out)


def fields_in(parts: list[Any]) -> list[str]:
    """Every field of a section, those of the sections inside it included."""
    return [name for part in parts for name, _unit in (PLACEHOLDER.findall(part) if isinstance(part, str) else [])] + [
        name for part in parts if isinstance(part, list) for name in fields_in(part)
    ]


VALUES: dict[str | None, Any] = {
    None: "text",
    "words": "two words",
    "iec": 5 * (1 << 20) + 123,
    "us": 1234.5,
    "grouped": 1234567,
    "gib_round2": 3 * (1 << 30),
}


def _event(template: Template, unset: set[str]) -> dict[str, Any]:
    event: dict[str, Any] = {"event": template.event, **template.when}
    for name, unit in reversed(PLACEHOLDER.findall(template.text)):  # a field printed twice: its first unit
        event[name] = None if name in unset else VALUES.get(unit or None, 7 * (1 << 30) + 98765)
    return event


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CURRENT), st.data())
def test_every_wording_renders_what_its_text_says(template: Template, data: st.DataObject) -> None:
    optional = [name for name in template.fields() if name not in template.required_fields()]
    unset = data.draw(st.sets(st.sampled_from(optional)) if optional else st.just(set()))
    event = _event(template, unset)
    assert template.render(event) == walked(split_sections(template.text), event)


def test_a_template_with_more_patterns_than_the_renderer_keeps_renders_each_of_them_every_time() -> None:
    names = [f"f{i}" for i in range(8)]  # 256 patterns of unset fields, more than one renderer keeps
    template = Template("x.y", "start" + "".join(f"{{[ {name}={{{name}:iec}}]}}" for name in names) + " end")
    patterns = [set(itertools.compress(names, mask)) for mask in itertools.product((0, 1), repeat=len(names))]
    for _ in range(2):  # the second time round, kept and not kept layouts alike
        for unset in patterns:
            event = {name: None if name in unset else 2048 for name in names}
            expected = "start" + "".join(f" {name}=2.00 KiB" for name in names if name not in unset) + " end"
            assert template.render(event) == expected


def test_a_wording_chosen_by_value_is_found_for_each_value_and_none_for_a_value_no_wording_has() -> None:
    base = {"event": "kv_pool.allocation", "layout": "mla", "kv_bytes": 3 << 30, "k_bytes": 1 << 30}
    allocated = render_message({**base, "allocation_state": "allocated", "v_bytes": 1 << 30})
    reserved = render_message({**base, "allocation_state": "va_upper_bound"})
    assert allocated == "KV Cache is allocated. KV size: 3.00 GB"
    assert reserved == "KV Cache VA upper bound. KV size: 3.00 GB"
    assert render_message({**base, "allocation_state": "other"}) is None
    commit = {"event": "kv_arena.commit", "arena_id": "a", "offset_bytes": 0, "nbytes": 4096}
    commit |= {"committed_bytes": 4096, "duration_us": 5.0}
    one, two = render_message({**commit, "range_count": 1}), render_message({**commit, "range_count": 2})
    assert one == "KvVmmArena[a] commit: offset=0 B size=4.00 KiB committed=4.00 KiB in 5.00 us"
    assert two == "KvVmmArena[a] commit: ranges=2 from offset=0 B size=4.00 KiB committed=4.00 KiB in 5.00 us"


def test_an_event_whose_choosing_value_is_a_list_gets_the_plain_line_not_an_error() -> None:
    event = {"event": "kv_pool.allocation", "level": "info", "allocation_state": ["allocated"], "layout": "mha"}
    event |= {"k_bytes": 1 << 30, "v_bytes": 1 << 30}
    assert render_message(event) is None
    assert console_line(event) == (
        "kv_pool.allocation allocation_state=['allocated'] layout=mha k_bytes=1073741824 v_bytes=1073741824"
    )


def chosen_by_the_rule(event: Mapping[str, Any]) -> str | None:
    """render_message's documented rule, read off the templates: the reference a kept choice must agree with."""
    fitting = [template for template in CURRENT if template.fits(event)]
    for template in fitting[:-1]:
        said = {*template.fields(), *template.when}
        if all(name in said for other in fitting for name in other.fields() if event.get(name) is not None):
            return template.render(event)
    return fitting[-1].render(event) if fitting else None


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CURRENT), st.data())
def test_a_kept_choice_of_wording_is_the_one_the_rule_makes_for_every_event_of_its_kind(
    template: Template, data: st.DataObject
) -> None:
    """Events of one name with other chosen-on values and other fields unset, each rendered twice (once
    choosing, once from what was kept): every line is the one the rule picks for that very event."""
    unset = data.draw(st.sets(st.sampled_from(template.fields())) if template.fields() else st.just(set()))
    event = _event(template, unset)
    for key in template.when:
        other = [t.when[key] for t in CURRENT if t.event == template.event and key in t.when]
        event[key] = data.draw(st.sampled_from([*other, None, "no wording has this"]))
    expected = outcome(chosen_by_the_rule, event)
    assert outcome(render_message, event) == expected
    assert outcome(render_message, dict(event)) == expected


def outcome(render: Any, event: Mapping[str, Any]) -> tuple[str, Any]:
    """The line, or the type of error (a value a wording cannot print in its unit) rendering raises."""
    try:
        return "line", render(event)
    except (TypeError, ValueError) as error:
        return "error", type(error)


#: literal text that is code or format syntax in Python: a template writes it as it is, never runs it
_CODE_LIKE = ["'", '"', "\\", "{", "}", "{{", "}}", "!r", ":>10", "{__import__('os').getpid()}", "f'", "\n", "%s"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_CODE_LIKE),
            st.text(max_size=5),
            st.just("{a}"),  # text, printed as it is
            st.sampled_from(["{b}", "{b:gib2}", "{b:iec}", "{b:grouped}"]),
            st.just("{["),
            st.just("]}"),
        ),
        max_size=12,
    ),
    st.sampled_from([None, 5, 3 << 30]),
)
def test_a_template_whose_text_is_code_or_format_syntax_writes_that_text(pieces: list[str], b: int | None) -> None:
    """The renderer is generated code: no text of a template (migration files come from pull requests) reaches it."""
    text = "".join(pieces)
    try:
        parts = split_sections(text)
    except ValueError:  # unbalanced sections: not a template
        return
    event = {"event": "x", "a": "{a} '}\\", "b": b}
    template = Template("x", text)
    if not template.fits(event):  # a required field is None: no wording is written with it
        return
    assert template.render(event) == walked(parts, event)


def _counting_generated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of names of every function the renderer compiles from now on."""
    compiled: list[int] = []
    generate = template_module._generated

    def counted(bound: Mapping[str, object], expression: str) -> Any:
        compiled.append(len(bound))
        return generate(bound, expression)

    monkeypatch.setattr(template_module, "_generated", counted)
    return compiled


def test_a_template_of_many_placeholders_renders_what_its_text_says_without_compiling_code_of_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Compiling a function of n closure variables costs time quadratic in n: 10,000 placeholders took seconds."""
    compiled = _counting_generated(monkeypatch)
    count = 4 * template_module.MAX_GENERATED_PIECES
    text = "[" + " ".join(f"{{f{i}:gib2}}{{[ ({{o{i}:iec}})]}}" for i in range(count)) + "]"
    event: dict[str, Any] = {f"f{i}": (i + 1) << 30 for i in range(count)} | {f"o{i}": 1024 for i in range(0, count, 2)}
    template = Template("x.many", text)
    for _ in range(2):
        assert template.render(event) == walked(split_sections(text), event)
    assert max(compiled, default=0) <= max(template_module.MAX_GENERATED_PIECES, template_module.MAX_GENERATED_NAMES)


def test_patterns_past_those_the_renderer_compiles_render_without_compiling_code_for_each_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream cycling through more patterns than are kept compiled one layout per event: 5x the cost of a walk."""
    names = [f"f{i}" for i in range(8)]
    template = Template("x.z", "start" + "".join(f"{{[ {name}={{{name}:iec}}]}}" for name in names) + " end")
    compiled = _counting_generated(monkeypatch)
    patterns = [set(itertools.compress(names, mask)) for mask in itertools.product((0, 1), repeat=len(names))]
    for _ in range(3):
        for unset in patterns:
            event = {name: None if name in unset else 2048 for name in names}
            assert template.render(event) == walked(split_sections(template.text), event)
    assert len(compiled) <= template_module._MAX_GENERATED_LAYOUTS + 1  # + the chooser of layouts
