"""A wording that prints one figure in parts (sglang's GDN ReplaySSM ``d=…GB, k=…GB, g=…GB``, its custom
all-reduce's ``symmetric_memory = … MB, local_buffer = … MB``): the event holds their sum and the sum of their
roundings, and the wording, which cannot say the parts back, never renders a line."""

from __future__ import annotations

import pytest

from kvlog.migration.errors import GrammarError
from kvlog.migration.grammar import _template
from kvlog.text.template import GIB, MIB, Template

RING = "rings: d={size_bytes:gib3}GB, k={size_bytes:gib3}GB{[, beta={size_bytes:gib3}GB]}"
EVENT = "memory.buffer_allocated"


def test_the_parts_add_up_and_so_do_their_roundings() -> None:
    parser = Template(EVENT, RING, sums=frozenset({"size_bytes"})).parser({})
    parsed = parser.parse("rings: d=1.250GB, k=0.625GB, beta=0.002GB")
    assert parsed is not None
    assert parsed.fields == {"size_bytes": round(1.25 * GIB) + round(0.625 * GIB) + round(0.002 * GIB)}
    assert parsed.uncertainty_bytes == {"size_bytes": 3 * 536871}
    # an optional part the line leaves out adds nothing
    shorter = parser.parse("rings: d=1.250GB, k=0.625GB")
    assert shorter is not None
    assert shorter.fields == {"size_bytes": round(1.25 * GIB) + round(0.625 * GIB)}
    assert shorter.uncertainty_bytes == {"size_bytes": 2 * 536871}


def test_without_sums_a_field_printed_twice_keeps_its_more_precise_figure() -> None:
    parsed = Template(EVENT, "{size_bytes:mib2} MB ({size_bytes:gib3} GB)").parser({}).parse("1.00 MB (0.001 GB)")
    assert parsed is not None
    assert parsed.fields == {"size_bytes": MIB}


def test_a_wording_that_sums_never_renders_a_line() -> None:
    event = {"event": EVENT, "size_bytes": GIB}
    assert Template(EVENT, RING).fits(event)
    assert not Template(EVENT, RING, sums=frozenset({"size_bytes"})).fits(event)


@pytest.mark.parametrize("sums", ["size_bytes", [1]])
def test_a_migration_file_s_sums_must_be_a_list_of_field_names(sums: object) -> None:
    with pytest.raises(GrammarError, match="'sums' is a list"):
        _template({"event": EVENT, "text": RING, "sums": sums})
