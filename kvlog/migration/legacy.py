"""Writing events back as text: today's wording (``--format text``) or an old one (``--format legacy``).

Both use the same templates the parser reads with. Today's wording is the console renderer's line.
The legacy wording is for monitoring parsers that cannot change yet: the event is taken down the chain
to catalog v1 (what old sglang could say) and written with the template of an old generation, or of an
older one, that can print it. That generation is the one the line was read with (``migrated.source_format``),
so an old log comes back as it was printed; ``--legacy-generation`` chooses another for every line, and
events of today's wording (or kvlog's own) go to their server's newest old one. A value the migration
inferred was never on the line (a dtype from a ``Using KV cache dtype`` line of one rank only): it is
not written, so every rank of a run gets the same wording. Events that old sglang never printed keep
today's wording. A line that had no prefix in the source gets none back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvlog.envelope import TIMESTAMP_NOT_ON_LINE
from kvlog.migration.grammar import Generation
from kvlog.migration.ops import inferred
from kvlog.migration.steps import Chain
from kvlog.text.console import console_line
from kvlog.text.prefix import SERVERS, ServerPrefix
from kvlog.text.units import INFERRED_FIELDS_MARK
from kvlog.text.wording import printed_fields


def current_line(event: Mapping[str, Any]) -> str:
    """Today's line for an event at its newest version."""
    return console_line(_without_invented_prefix(event))


def text_line(event: Mapping[str, Any]) -> str:
    """Today's line (``--format text``), ending `` (inferred: dtype)`` when values it says were inferred.

    The timestamp is not marked: a prefix the line did not print is left out, one it printed is its own.
    The migration reads the ending back as the same inferences, so text of text is the same text.
    """
    said = printed_fields(event)
    marked = sorted(
        name for name in inferred(event) if name != "timestamp" and name in said and event.get(name) is not None
    )
    line = current_line(event)
    return line + INFERRED_FIELDS_MARK.format(fields=", ".join(marked)) if marked else line


class LegacyRenderer:
    """Old wording of one generation (and, as fallbacks, the generations of its server before it).

    Without a chosen generation, each event is written in the old wording it was read from, else in its
    own server's newest old wording: a line migrated from vLLM goes back to vLLM's, everything else to
    sglang's.
    """

    def __init__(self, chain: Chain, generation_id: str | None = None) -> None:
        newest = chain.catalog.newest_release()
        legacy = [g for g in chain.generations() if g.catalog_version < newest]
        if not legacy:
            raise ValueError("the chain has no legacy text generation")
        ids = [g.id for g in legacy]
        if generation_id is not None and generation_id not in ids:
            raise ValueError(f"unknown legacy generation {generation_id!r} (known: {', '.join(ids)})")
        self.chain = chain
        self.chosen = generation_id
        #: by server: the generations to write with, the chosen (or newest) first, then older ones
        self.by_server: dict[str, list[Generation]] = {}
        #: by generation id: that generation first, then the older ones of its server
        self.from_generation: dict[str, list[Generation]] = {}
        for server in sorted({g.server for g in legacy}):
            own = [g for g in legacy if g.server == server]
            own_ids = [g.id for g in own]
            last = own_ids.index(generation_id) if generation_id in own_ids else len(own) - 1
            self.by_server[server] = own[: last + 1][::-1]
            for index, generation in enumerate(own):
                self.from_generation[generation.id] = own[: index + 1][::-1]
        self.default_server = legacy[ids.index(generation_id)].server if generation_id else "sglang"

    def line(self, event: Mapping[str, Any]) -> str:
        """The legacy line for an event at its newest version."""
        if self.chosen:
            generations = self.by_server[self.default_server]
        else:
            source = _source_format(event)
            generations = self.from_generation.get(source or "") or self.by_server.get(
                _server_of(source) or self.default_server, self.by_server[self.default_server]
            )
        said = _as_said(event)
        name = str(event["event"])
        for generation in generations:
            version = self.chain.catalog.at_catalog_version(name, generation.catalog_version)
            if version is None:
                continue
            old = dict(said)
            if version != event["schema_version"]:
                for step in self.chain.path(name, int(event["schema_version"]), version):
                    old = step.apply(old)
            for template, template_version in generation.templates():
                if template_version == old["schema_version"] and template.fits(old):
                    return _prefixed(old, template.render(old), SERVERS[generation.server])
        return current_line(said)


def _source_format(event: Mapping[str, Any]) -> str | None:
    """The wording an event was read from (``migrated.source_format``: ``vllm-text/2024-10``), if it says."""
    migrated = event.get("migrated")
    source = migrated.get("source_format") if isinstance(migrated, dict) else None
    return source if isinstance(source, str) else None


def _server_of(source: str | None) -> str | None:
    """The server of a text wording (``vllm-text/…`` -> ``vllm``), None for kvlog's JSON or no source."""
    server = source.split("-text/", 1)[0] if source is not None and "-text/" in source else None
    return server if server in SERVERS else None


def _as_said(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """``event`` without the values the migration inferred (but the timestamp, which the prefix handles).

    An inferred value is one the line did not say: writing it back would put words in the server's
    mouth, and only on the ranks whose other lines gave the evidence.
    """
    blanked = [name for name in inferred(event) if name != "timestamp" and event.get(name) is not None]
    return {**event, **dict.fromkeys(blanked)} if blanked else event


def _prefixed(event: Mapping[str, Any], message: str, prefix: ServerPrefix) -> str:
    event = _without_invented_prefix(event)
    return prefix.build(event.get("timestamp"), event.get("ranks")) + message


def _without_invented_prefix(event: Mapping[str, Any]) -> Mapping[str, Any]:
    note = inferred(event).get("timestamp")
    rule = note.get("rule") if isinstance(note, dict) else None
    if rule in TIMESTAMP_NOT_ON_LINE:
        return {k: v for k, v in event.items() if k != "timestamp"}
    return event
