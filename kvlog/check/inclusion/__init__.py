"""Whether every instance one schema accepts is accepted by another: yes, no with an instance, or undecided.

``Judge.includes(writer, reader)`` answers for Draft 2020-12 schemas (``kvlog.check.drafts`` reads the
other drafts into them). The reader is split exactly: an instance must satisfy every ``allOf``
member, the base keywords, each ``anyOf``/``oneOf``/``not``/``if`` group, so each is a question of
its own. The writer is split into simpler branches (its types, ``anyOf``/``oneOf`` branches,
``if``/``then``/``else`` arms), which may over-approximate it: that keeps "yes" sound, and every "no"
carries a candidate instance that is checked against both schemas before anyone sees it. Where a
proof would need more than these rules (overlapping ``oneOf``, ``unevaluated*`` beside dynamic
applicators, patterns outside the regular dialect), the answer is "undecided", with the reason.

One module a job, in the manner of python-jsonschema's ``_keywords.py``:

- ``outcome``: the answer (``Inclusion``, its ``Reason``s and ``Found`` instance) and ``conjoin``;
- ``judge``: the driver (``Judge``), which asks each reader part of the rule ``keywords`` names;
- ``keywords``: the keyword table, from each reader keyword to its rule;
- ``applicators``, ``scalars``, ``arrays``, ``objects``: the rules, per applicator and per type;
- ``kinds`` (the types a ``type`` lets through), ``bounds`` (intervals and ranges), ``algebra``
  (conjunctions and branches of schemas), ``members`` (what applies to one member or item),
  ``witnesses`` (the instance behind every "no").
"""

from __future__ import annotations

from kvlog.check.inclusion.judge import Judge
from kvlog.check.inclusion.outcome import Found, Inclusion, Reason

__all__ = ["Found", "Inclusion", "Judge", "Reason"]
