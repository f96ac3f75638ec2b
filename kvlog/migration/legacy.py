"""Writing events back as text: today's wording (``--format text``) or an old one (``--format legacy``).

Both use the same templates the parser reads with. Today's wording is the console renderer's line.
The legacy wording is for monitoring parsers that cannot change yet: the event is taken down the chain
to catalog v1 (what old sglang could say) and written with the newest template of the chosen old
generation, or of an older one, that can print it. Events that old sglang never printed keep today's
wording. A line that had no prefix in the source gets none back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvlog.envelope import TIMESTAMP_NOT_ON_LINE
from kvlog.migration.grammar import Generation
from kvlog.migration.steps import Chain
from kvlog.text.console import console_line
from kvlog.text.prefix import SGLANG


def current_line(event: Mapping[str, Any]) -> str:
    """Today's line for an event at its newest version."""
    return console_line(_without_invented_prefix(event))


class LegacyRenderer:
    """Old wording of one generation (and, as fallbacks, the generations before it)."""

    def __init__(self, chain: Chain, generation_id: str | None = None) -> None:
        newest = chain.catalog.newest_release()
        generations = [g for g in chain.generations() if g.catalog_version < newest]
        if not generations:
            raise ValueError("the chain has no legacy text generation")
        ids = [g.id for g in generations]
        chosen = generation_id or ids[-1]
        if chosen not in ids:
            raise ValueError(f"unknown legacy generation {chosen!r} (known: {', '.join(ids)})")
        self.chain = chain
        self.catalog_version = generations[ids.index(chosen)].catalog_version
        self.generations: Sequence[Generation] = generations[: ids.index(chosen) + 1][::-1]

    def line(self, event: Mapping[str, Any]) -> str:
        """The legacy line for an event at its newest version."""
        name = str(event["event"])
        version = self.chain.catalog.at_catalog_version(name, self.catalog_version)
        old = dict(event)
        if version is not None and version != event["schema_version"]:
            for step in self.chain.path(name, int(event["schema_version"]), version):
                old = step.apply(old)
        for generation in self.generations:
            for template, template_version in generation.templates():
                if template_version == old["schema_version"] and template.fits(old):
                    return _prefixed(old, template.render(old))
        return current_line(event)


def _prefixed(event: Mapping[str, Any], message: str) -> str:
    event = _without_invented_prefix(event)
    return SGLANG.build(event.get("timestamp"), event.get("ranks")) + message


def _without_invented_prefix(event: Mapping[str, Any]) -> Mapping[str, Any]:
    migrated = event.get("migrated")
    rule = migrated.get("inferred", {}).get("timestamp", {}).get("rule") if isinstance(migrated, dict) else None
    if rule in TIMESTAMP_NOT_ON_LINE:
        return {k: v for k, v in event.items() if k != "timestamp"}
    return event
