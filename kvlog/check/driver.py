"""One ``kvlog check`` run: read the catalog (and the release it is compared with), apply every rule."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from kvlog.check import migrations
from kvlog.check.corpus import replay_corpus
from kvlog.check.evolution import Evolution, Mode
from kvlog.check.files import inside
from kvlog.check.findings import Finding
from kvlog.check.gitref import files_at_ref
from kvlog.check.linear_validator import CheckValidator
from kvlog.check.naming import check_naming
from kvlog.check.patterns import check_patterns
from kvlog.check.project import Project
from kvlog.check.snapshot import Snapshot, refusals
from kvlog.check.structure import check_structure


@dataclass(frozen=True)
class CheckOptions:
    """What to check and how strictly."""

    project: Project
    mode: Mode = "backward"
    against: str | None = None
    corpus: Path | None = None


@dataclass
class CheckReport:
    """The findings of a run and which rule families were skipped, with why (for JUnit and the status line)."""

    findings: list[Finding] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    schema_files: int = 0
    migration_steps: int = 0
    corpus_files: int = 0


def run_check(options: CheckOptions) -> CheckReport:
    """Apply every rule that the options make applicable; raise ``KvlogError`` only for unusable options."""
    report = CheckReport()
    root = options.project.root
    current = Snapshot.from_directory(options.project.schemas, root)
    report.schema_files = len(current.all_files()) + len(current.findings)
    structure = check_structure(current)
    usable = current.without(structure.broken)  # the rules below assume what the structure rules check
    report.findings += current.findings + structure.findings + check_patterns(current) + check_naming(usable)
    catalog = usable.catalog
    validator = CheckValidator(catalog)
    chain, unloadable = migrations.load(options.project.migrations, catalog, root)
    if chain is not None or not structure.broken:
        report.findings += unloadable
    else:  # a step may fail only because a schema it names was left out
        left_out = f" (schemas with errors are left out: {', '.join(sorted(structure.broken))})"
        report.findings += [replace(finding, message=finding.message + left_out) for finding in unloadable]
    if chain is None:
        report.skipped["KV3"] = report.skipped["KV4"] = "the migrations do not load (KV301)"
    else:
        report.migration_steps = len(chain.steps)
        report.findings += migrations.check_complete(chain, usable)
        report.findings += migrations.check_examples(chain, validator)
    if options.corpus is None:
        report.skipped["KV5"] = "no corpus: name a directory of golden logs, or [tool.kvlog] corpus"
    elif chain is None:
        report.skipped["KV5"] = "the migrations do not load (KV301)"
    else:
        corpus_root = root if inside(options.corpus, root) else options.corpus  # given on the command line
        replayed = replay_corpus(options.corpus, chain, validator, corpus_root)
        report.findings += replayed.findings
        report.corpus_files = replayed.files
    if options.against is None:
        report.skipped["KV2"] = "needs a git ref to compare against"
    else:
        files, refused, prefix = files_at_ref(options.project.schemas, options.against)
        labels = {rel: f"{options.against}:{prefix}{rel}" for rel in [*files, *refused]}
        released = Snapshot.from_files(options.against, files, labels)
        report.findings += refusals(refused, labels)
        then = check_structure(released)
        evolution = Evolution(current, released, structure.resolved, then.resolved)
        report.findings += evolution.check(options.mode, migrations.coverage(chain))
    return report
