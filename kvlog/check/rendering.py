"""Rendering findings for people (text), GitHub Actions (workflow commands), CI dashboards (JUnit) and tools (JSON)."""

from __future__ import annotations

import json
from typing import Literal
from xml.etree import ElementTree

from kvlog.check.driver import CheckReport
from kvlog.check.findings import RULES, Finding, count_errors
from kvlog.text.printable import CATALOG_REPORT, printable, printable_name

Format = Literal["text", "github", "junit", "json"]
_GITHUB_COMMAND = {"error": "error", "warning": "warning", "note": "notice"}
_GITHUB_ESCAPES = "\n\r"  # GitHub's own escaping writes these as %0A and %0D


def format_report(report: CheckReport, output_format: Format) -> str:
    """The report in ``output_format``; text and github end with a newline when non-empty."""
    if output_format == "json":
        # the stdlib writes any integer a counterexample holds (orjson stops at 64 bits)
        return json.dumps([_as_json(f) for f in report.findings], indent=2, ensure_ascii=False) + "\n"
    if output_format == "junit":
        return junit(report)
    lines = [(_github if output_format == "github" else _text)(finding) for finding in report.findings]
    return "".join(f"{line}\n" for line in lines)


def status_line(report: CheckReport) -> str:
    """One line: what was checked and what was found."""
    levels = [f.level for f in report.findings]
    errors, warnings, notes = levels.count("error"), levels.count("warning"), levels.count("note")
    skipped = "".join(f"; skipped {family}xx ({why})" for family, why in sorted(report.skipped.items()))
    return (
        f"kvlog check: {_count(errors, 'error')}, {_count(warnings, 'warning')}, {_count(notes, 'note')} "
        f"({_count(report.schema_files, 'schema file')}, {_count(report.migration_steps, 'migration step')}, "
        f"{_count(report.corpus_files, 'corpus file')}{skipped})"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _text(finding: Finding) -> str:
    if finding.file is None:
        where = "kvlog check"
    else:
        where = printable_name(finding.file, escaping=CATALOG_REPORT) + (
            f":{finding.line}" if finding.line is not None else ""
        )
    return f"{where}: {finding.rule} {finding.level}: {printable(finding.message, escaping=CATALOG_REPORT)}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(finding: Finding) -> str:
    r"""A workflow command: newlines and ``%`` by GitHub's own escaping (``%0A``), other controls as ``\xNN``."""
    properties = []
    if finding.file is not None:
        file = printable_name(finding.file, escaping=CATALOG_REPORT, keep=_GITHUB_ESCAPES)
        properties.append(f"file={_escape_property(file)}")
    if finding.line is not None:
        properties.append(f"line={finding.line}")
    properties.append(f"title={_escape_property(f'{finding.rule} {RULES[finding.rule].name}')}")
    message = _escape_data(printable(finding.message, escaping=CATALOG_REPORT, keep=_GITHUB_ESCAPES))
    return f"::{_GITHUB_COMMAND[finding.level]} {','.join(properties)}::{message}"


def _as_json(finding: Finding) -> dict[str, object]:
    rule = RULES[finding.rule]
    return {
        "rule": finding.rule,
        "name": rule.name,
        "level": finding.level,
        "file": None if finding.file is None else printable_name(finding.file, escaping=CATALOG_REPORT),
        "line": finding.line,
        "message": printable(finding.message, escaping=CATALOG_REPORT),
        **({} if finding.counterexample is None else {"counterexample": json.loads(finding.counterexample)}),
    }


def junit(report: CheckReport) -> str:
    """One test case per rule: failed with its error findings, skipped when its family did not run."""
    suite = ElementTree.Element("testsuite", name="kvlog check", tests=str(len(RULES)))
    failures = skipped = 0
    for rule in RULES.values():
        case = ElementTree.SubElement(suite, "testcase", classname="kvlog.check", name=f"{rule.id} {rule.name}")
        mine = [f for f in report.findings if f.rule == rule.id]
        reason = report.skipped.get(rule.id[:3])
        if reason is not None and not mine:
            ElementTree.SubElement(case, "skipped", message=reason)
            skipped += 1
            continue
        if count_errors(mine):
            failures += 1
            failure = ElementTree.SubElement(case, "failure", message=f"{count_errors(mine)} {rule.summary} violations")
            failure.text = "\n".join(_text(f) for f in mine if f.level == "error")
        others = [_text(f) for f in mine if f.level != "error"]
        if others:
            ElementTree.SubElement(case, "system-out").text = "\n".join(others)
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suite, encoding="unicode") + "\n"
