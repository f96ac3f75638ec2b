#!/usr/bin/env python3
"""Harvest every memory-related log format that sglang and vLLM ever released.

The migration of old server logs needs to know every message shape a server ever
printed about memory and the KV cache, not only the ones in today's source. PyPI
keeps every release, so this script reads them all and writes `formats/<server>.json`
as committed data; each format there later gets an explicit decision.

Wheels are hundreds of megabytes (vLLM's sum to ~41 GB) while the Python we need is a
few megabytes, so a wheel is never downloaded: its central directory and the wanted
`.py` members are read with HTTP range requests. Members are cached by
(path, CRC-32, size), so a file unchanged between releases is fetched and parsed
once, and a re-run only reads releases it has not seen. The sources are cached too
(compressed), so a change of the extraction re-reads them from disk, not from PyPI.

Maintainer tool, stdlib only; not part of the `kvlog` package.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import hashlib
import http.client
import json
import os
import re
import struct
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVERS: tuple[str, ...] = ("sglang", "vllm")
INDEX_URL = "https://pypi.org/simple/{project}/"
INDEX_ACCEPT = "application/vnd.pypi.simple.v1+json"
USER_AGENT = "kvlog-harvest-formats/1 (+maintainer script)"

# Memory or KV-cache wording. Deliberately generous: a false positive costs one
# explicit "not a memory line" decision later, a miss costs a silently unmigrated line.
MEMORY_FILTER = (
    r"\b\d*(?:GB|GiB|MB|MiB|KiB|KB|TB|TiB)\b"
    r"|\bmem\b|mem_|_mem\b|memory|\bbytes\b|_bytes|\bOOM\b|fragmentation"
    r"|kv[ _-]?cache|kv[ _]?pool|kvpool|cache size|cache_size"
    r"|\bblocks\b|_blocks\b"
    r"|max_total_num_tokens?|max_total_tokens|token_to_kv|#tokens|token usage|concurrency"
    r"|is allocated|reserved|VmmArena|CuMemAllocator|sleep mode"
    r"|hicache|host pool|mamba cache"
)
MEMORY_RE = re.compile(MEMORY_FILTER, re.IGNORECASE)

LOG_METHODS = frozenset({"info", "warning", "warn", "error", "debug", "critical", "exception", "log"})
ONCE_METHODS = frozenset(f"{m}_once" for m in LOG_METHODS)
LOGGER_NAMES = frozenset({"logger", "logging", "log", "_logger", "_log", "LOGGER", "LOG"})
# Helpers called as bare functions; the ones taking a logger first are listed below.
HELPER_FUNCTIONS = frozenset(
    {
        "print",
        "print_info_once",
        "print_warning_once",
        "print_warn_once",
        "print_debug_once",
        "info_once",
        "warning_once",
        "warn_once",
        "debug_once",
        "log_info_on_rank0",
        "rank0_log",
        "rank0_print",
    }
)

#: an object logged as it is (`logger.debug(profile_result)`) prints what these return; level "repr"
TEXT_METHODS = frozenset({"__repr__", "__str__"})

SKIPPED_DIRS = frozenset({"test", "tests", "examples"})
MAX_GAP = 256 * 1024
MAX_SPAN = 8 * 1024 * 1024
LOCAL_SLACK = 512
RETRIES = 5
# Part of the member cache's path: bump it when extraction changes, since the cache
# keeps extracted calls, not sources, and stale ones would otherwise be reused silently.
EXTRACTOR_VERSION = 4


class HarvestError(RuntimeError):
    """Raised for failures the maintainer must see: network, or a file not a zip."""


# --------------------------------------------------------------------------- versions

try:
    from packaging.version import InvalidVersion, Version

    def version_key(text: str) -> Any:
        """Sorts as PEP 440 does; unparsable versions go first, by text."""
        try:
            return (1, Version(text), text)
        except InvalidVersion:
            return (0, None, text)

except ImportError:  # pragma: no cover - the venv has packaging
    _PRE = {"a": 0, "b": 1, "rc": 2, "c": 2}

    def version_key(text: str) -> Any:
        """PEP 440 ordering for the shapes PyPI projects use: N(.N)*[{a|b|rc}N][.postN][.devN]."""
        m = re.fullmatch(
            r"v?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|rc|c)(\d*))?(?:[-_.]?post(\d*))?(?:[-_.]?dev(\d*))?(?:\+.*)?",
            text.lower(),
        )
        if not m:
            return (0, (), text)
        rel = [int(p) for p in m.group(1).split(".")]
        while len(rel) > 1 and rel[-1] == 0:
            rel.pop()
        pre = (_PRE[m.group(2)], int(m.group(3) or 0)) if m.group(2) else None
        post = int(m.group(4) or 0) if m.group(4) is not None else None
        dev = int(m.group(5) or 0) if m.group(5) is not None else None
        # dev-only releases sort before pre-releases, which sort before the release
        pre_key = (-2, 0) if pre is None and post is None and dev is not None else (pre or (9, 0))
        post_key = -1 if post is None else post
        dev_key = 1 << 62 if dev is None else dev
        return (1, (tuple(rel), pre_key, post_key, dev_key), text)


# --------------------------------------------------------------------------- extraction


@dataclass(frozen=True)
class Rendered:
    """A log message reduced to a format string; `args` are expression sources."""

    text: str
    style: str
    args: tuple[str, ...] = ()


def _src(node: ast.AST) -> str:
    # unparse, not get_source_segment: 3.11 misplaces positions inside f-strings,
    # and a normalised spelling keeps one format from becoming two over reformatting.
    return ast.unparse(node)


def _escape_braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _render_spec(spec: ast.JoinedStr) -> str:
    out: list[str] = []
    for part in spec.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            out.append(part.value)
        elif isinstance(part, ast.FormattedValue):
            out.append(_render_field(part))
    return "".join(out)


def _render_field(node: ast.FormattedValue) -> str:
    text = "{" + _src(node.value)
    if node.conversion != -1:
        text += "!" + chr(node.conversion)
    if node.format_spec is not None:
        text += ":" + _render_spec(node.format_spec)  # type: ignore[arg-type]
    return text + "}"


def _render_fstring(node: ast.JoinedStr) -> str:
    out: list[str] = []
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            out.append(_escape_braces(part.value))
        elif isinstance(part, ast.FormattedValue):
            out.append(_render_field(part))
    return "".join(out)


def _flatten_add(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _flatten_add(node.left) + _flatten_add(node.right)
    return [node]


def _is_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def render_message(node: ast.expr) -> Rendered | None:
    """The format string of a message expression, or None when it is not a string expression."""
    if _is_str(node):
        return Rendered(node.value, "plain")  # type: ignore[attr-defined]
    if isinstance(node, ast.JoinedStr):
        return Rendered(_render_fstring(node), "fstring")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = render_message(node.left)
        if left is None:
            return None
        right = node.right
        elts = right.elts if isinstance(right, ast.Tuple) else [right]
        return Rendered(left.text, "percent", left.args + tuple(_src(e) for e in elts))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and (_is_str(node.func.value) or isinstance(node.func.value, ast.BinOp))
    ):
        base = render_message(node.func.value)
        if base is None:
            return None
        args = [_src(a) for a in node.args]
        args += [(f"{k.arg}={_src(k.value)}" if k.arg else f"**{_src(k.value)}") for k in node.keywords]
        return Rendered(base.text, "format", base.args + tuple(args))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = _flatten_add(node)
        if not any(_is_str(p) or isinstance(p, ast.JoinedStr) for p in parts):
            return None
        return _join_parts(parts, "")
    return None


def _join_parts(parts: list[ast.expr], sep: str) -> Rendered:
    """Joins `+` operands or print() arguments; a non-string part becomes `{source}`."""
    texts: list[str] = []
    args: list[str] = []
    interpolated = False
    for part in parts:
        if _is_str(part):
            texts.append(_escape_braces(part.value))  # type: ignore[attr-defined]
            continue
        if isinstance(part, ast.JoinedStr):
            texts.append(_render_fstring(part))
            interpolated = True
            continue
        sub = render_message(part)
        if sub is not None and sub.style in ("percent", "format"):
            # an already-formatted piece: keep its text, the whole becomes an f-string-like join
            texts.append(_escape_braces(sub.text))
            args.extend(sub.args)
        else:
            texts.append("{" + _src(part) + "}")
        interpolated = True
    return Rendered(sep.join(texts), "fstring" if interpolated else "plain", tuple(args))


def _receiver_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_logger(node: ast.expr) -> bool:
    name = _receiver_name(node)
    if name is None:
        return False
    return name in LOGGER_NAMES or name.lower().endswith("logger")


@dataclass
class Extraction:
    """What one source file yields; cached per member so it is computed once."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    error: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "skipped": self.skipped, "error": self.error}


def _call_target(call: ast.Call) -> tuple[str, list[ast.expr]] | None:
    """The level and the message-bearing arguments of a logging call, or None."""
    func = call.func
    if isinstance(func, ast.Attribute):
        method = func.attr
        if (method in LOG_METHODS or method in ONCE_METHODS) and _is_logger(func.value):
            args = list(call.args)
            if method == "log":
                args = args[1:]  # logger.log(level, msg, *args)
            return method, args
        if method in HELPER_FUNCTIONS and method != "print" and not method.startswith("log"):
            return method, list(call.args)
        if method == "set_description" and call.args:
            return "tqdm", list(call.args[:1])  # a progress bar's text, printed to stderr with the bar
        return None
    if isinstance(func, ast.Name) and func.id in HELPER_FUNCTIONS:
        args = list(call.args)
        if args and func.id != "print" and _is_logger(args[0]):
            args = args[1:]  # log_info_on_rank0(logger, msg)
        return ("print" if func.id == "print" else func.id), args
    return None


# ------------------------------------------------------------------------- data flow
#
# Servers often build a message before logging it: `msg = f"..."; msg += "..."; logger.info(msg)`, or pass
# it to a local function that logs it. Within one scope (a function, a class body, the module), the
# string values a name may hold are followed statement by statement, branches merged, and substituted
# into a message before it is rendered; a parameter that reaches a logging call makes its function a
# helper whose call sites are rendered with their argument.

#: string values one name, or one message, may take at most; more (a long chain of branches) are dropped
MAX_VALUES = 8
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
Env = dict[str, tuple[ast.expr, ...]]


def _product(options: list[list[ast.expr]]) -> list[list[ast.expr]]:
    out: list[list[ast.expr]] = [[]]
    for choices in options:
        out = [[*prefix, choice] for prefix in out for choice in choices][:MAX_VALUES]
    return out


def _splice(node: ast.JoinedStr, env: Env) -> list[ast.expr]:
    """An f-string with each plain `{name}` holding a string replaced by that string's pieces."""
    options: list[list[ast.expr]] = []
    for part in node.values:
        if (
            isinstance(part, ast.FormattedValue)
            and part.conversion == -1
            and part.format_spec is None
            and isinstance(part.value, ast.Name)
            and part.value.id in env
        ):
            options.append(list(env[part.value.id]))
        else:
            options.append([part])
    if all(len(o) == 1 and o[0] is p for o, p in zip(options, node.values, strict=True)):
        return [node]
    # the f-string as written comes first: a name interpolated in it may hold, at run time, what no
    # statement of this scope shows (sglang's ``Capture {capture_name} CUDA graph end.`` prints ``target
    # decode`` where the scope binds only ``draft prefill`` or ``target prefill``); the strings it is
    # seen to hold are added to it, never in its place
    joined: list[ast.expr] = [node]
    for choice in _product(options):
        values: list[ast.expr] = []
        for piece in choice:
            if isinstance(piece, ast.JoinedStr):
                values.extend(piece.values)
            elif _is_str(piece) or isinstance(piece, ast.FormattedValue):
                values.append(piece)
            else:  # an expression held by the name: interpolated as the f-string would
                values.append(ast.FormattedValue(value=piece, conversion=-1, format_spec=None))
        joined.append(ast.JoinedStr(values=values))
    return joined


def substitute(node: ast.expr, env: Env) -> list[ast.expr]:
    """The message expression with every name in a message position replaced by the strings it may hold.

    A message position is where the name's text becomes the message's: the whole message, an operand
    of `+`, the left of `%`, the receiver of `.format`, a plain `{name}` of an f-string, either arm of
    a conditional. Names elsewhere (the values interpolated) are left as they are.
    """
    if isinstance(node, ast.Name):
        return list(env.get(node.id, (node,)))
    if isinstance(node, ast.IfExp):
        return (substitute(node.body, env) + substitute(node.orelse, env))[:MAX_VALUES]
    if isinstance(node, ast.JoinedStr):
        return _splice(node, env)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        lefts = substitute(node.left, env)
        rights = substitute(node.right, env) if isinstance(node.op, ast.Add) else [node.right]
        if len(lefts) == 1 and len(rights) == 1 and lefts[0] is node.left and rights[0] is node.right:
            return [node]
        return [ast.BinOp(left=a, op=node.op, right=b) for a in lefts for b in rights][:MAX_VALUES]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        receivers = substitute(node.func.value, env)
        if len(receivers) == 1 and receivers[0] is node.func.value:
            return [node]
        return [
            ast.Call(func=ast.Attribute(value=r, attr="format", ctx=ast.Load()), args=node.args, keywords=node.keywords)
            for r in receivers
        ]
    return [node]


def _stored_names(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
            yield sub.id


def _without(env: Env, names: Iterable[str]) -> Env:
    names = set(names) & env.keys()
    return {k: v for k, v in env.items() if k not in names} if names else env


def _bind(env: Env, name: str, value: ast.expr) -> Env:
    """`name = value`: the name holds the strings `value` may be, or nothing known when it is no string."""
    held = tuple(v for v in substitute(value, env) if render_message(v) is not None)
    if not held:
        return _without(env, [name])
    return {**env, name: held}


def _merge(*envs: Env) -> Env:
    """After branches: a name holds what any branch left in it, if every branch left it a string."""
    common = set(envs[0]).intersection(*envs[1:])
    merged: Env = {}
    for name in sorted(common):
        values: list[ast.expr] = []
        for env in envs:
            values.extend(v for v in env[name] if v not in values)
        merged[name] = tuple(values[:MAX_VALUES])
    return merged


class _Flow:
    """Walks one scope's statements, recording the environment (and the scope) every call is evaluated in."""

    def __init__(self) -> None:
        self.env_at: dict[int, Env] = {}
        self.scope_of: dict[int, ast.AST] = {}
        self.scope: ast.AST | None = None

    def _record(self, env: Env, *nodes: ast.AST | None) -> set[str]:
        """Records the calls under `nodes`; returns the names they store."""
        stored: set[str] = set()
        for node in nodes:
            if node is None:
                continue
            stack: list[ast.AST] = [node]
            while stack:
                sub = stack.pop()
                if isinstance(sub, ast.Call):
                    self.env_at[id(sub)] = env
                    if self.scope is not None:
                        self.scope_of[id(sub)] = self.scope
                elif isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
                    stored.add(sub.id)
                if not isinstance(sub, _SCOPES):
                    stack.extend(ast.iter_child_nodes(sub))
        return stored

    def scan(self, scope: ast.AST, body: list[ast.stmt]) -> None:
        """Follows one scope's body from an empty environment."""
        self.scope = scope
        self.block(body, {})

    def block(self, body: list[ast.stmt], env: Env) -> Env:
        for stmt in body:
            env = self.statement(stmt, env)
        return env

    def statement(self, stmt: ast.stmt, env: Env) -> Env:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            # the body is a scope of its own; only what is evaluated here is recorded
            heads: list[ast.AST] = list(stmt.decorator_list)
            if isinstance(stmt, ast.ClassDef):
                heads += stmt.bases + [k.value for k in stmt.keywords]
            else:
                heads += [d for d in stmt.args.defaults + stmt.args.kw_defaults if d is not None]
            self._record(env, *heads)
            return _without(env, [stmt.name])
        if isinstance(stmt, ast.Assign):
            self._record(env, stmt.value)
            after = env
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    after = _bind(after, target.id, stmt.value)
                else:
                    self._record(env, target)
                    after = _without(after, _stored_names(target))
            return after
        if isinstance(stmt, ast.AnnAssign):
            self._record(env, stmt.value)
            if isinstance(stmt.target, ast.Name) and stmt.value is not None:
                return _bind(env, stmt.target.id, stmt.value)
            return env
        if isinstance(stmt, ast.AugAssign):
            self._record(env, stmt.value)
            if isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add) and stmt.target.id in env:
                grown = ast.BinOp(left=ast.Name(id=stmt.target.id, ctx=ast.Load()), op=ast.Add(), right=stmt.value)
                return _bind(env, stmt.target.id, grown)
            return _without(env, _stored_names(stmt.target))
        if isinstance(stmt, ast.If):
            self._record(env, stmt.test)
            return _merge(self.block(stmt.body, env), self.block(stmt.orelse, env))
        if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
            if isinstance(stmt, ast.While):
                self._record(env, stmt.test)
                entry = env
            else:
                self._record(env, stmt.iter)
                entry = _without(env, _stored_names(stmt.target))
            looped = self.block(stmt.body, entry)
            if any(looped.get(name) not in (None, held) for name, held in entry.items()):
                # a second pass sees what the first iteration left (`msg += ...` in a loop)
                looped = self.block(stmt.body, _merge(entry, looped))
            return self.block(stmt.orelse, _merge(env, looped))
        if isinstance(stmt, ast.With | ast.AsyncWith):
            self._record(env, *[item.context_expr for item in stmt.items])
            names = [n for item in stmt.items if item.optional_vars for n in _stored_names(item.optional_vars)]
            return self.block(stmt.body, _without(env, names))
        if isinstance(stmt, ast.Try | ast.TryStar):
            tried = self.block(stmt.body, env)
            handled = [
                self.block(h.body, _without(_merge(env, tried), [h.name] if h.name else [])) for h in stmt.handlers
            ]
            done = _merge(self.block(stmt.orelse, tried), *handled)
            return self.block(stmt.finalbody, done)
        if isinstance(stmt, ast.Match):
            self._record(env, stmt.subject)
            arms = []
            for case in stmt.cases:
                self._record(env, case.guard)
                arms.append(self.block(case.body, _without(env, _stored_names(case.pattern))))
            return _merge(env, *arms)
        return _without(env, self._record(env, stmt))


@dataclass(frozen=True)
class _Helper:
    """A local function or method whose parameter reaches a logging call's message."""

    level: str
    param: str
    index: int  # the parameter's position among the arguments a caller writes
    message: ast.expr
    extra: tuple[ast.expr, ...]
    vararg: str | None  # `*args` of the helper, which the caller's further arguments fill

    def arguments(self, call: ast.Call) -> list[ast.expr]:
        """The logging call's arguments after the message, the helper's `*args` filled from the call."""
        out: list[ast.expr] = []
        for arg in self.extra:
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) and arg.value.id == self.vararg:
                out.extend(call.args[self.index + 1 :])
            else:
                out.append(arg)
        return out


def _log_arguments(call: ast.Call) -> tuple[str, list[ast.expr]] | None:
    """The level and the message-bearing arguments of a logging call, after `logger.info("%s", msg)`."""
    target = _call_target(call)
    if target is None:
        return None
    level, args = target
    if level != "print" and len(args) == 2 and _is_str(args[0]) and args[0].value == "%s":  # type: ignore[attr-defined]
        args = args[1:]  # the message is the argument
    return level, args


def _held(node: ast.expr, env: Env) -> bool:
    """Whether the expression is a name holding strings here."""
    return isinstance(node, ast.Name) and node.id in env


def _helpers(nodes: list[ast.AST], flow: _Flow) -> dict[str, _Helper]:
    """Local functions and methods (of the module or a class) that log a parameter, by name."""
    owner: dict[int, ast.AST] = {}
    for node in nodes:
        if isinstance(node, ast.ClassDef | ast.Module):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    owner[id(fn)] = node
    found: dict[str, _Helper] = {}
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        fn = flow.scope_of.get(id(node))
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or id(fn) not in owner or fn.name in found:
            continue
        logged = _log_arguments(node)
        if logged is None or not logged[1]:
            continue
        level, args = logged
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        is_method = isinstance(owner[id(fn)], ast.ClassDef) and not any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list
        )
        offered = params[1:] if is_method and params else params
        for index, param in enumerate(offered):
            marker = ast.Constant(value="\0")
            if any(_mentions(v, marker) for v in substitute(args[0], {param: (marker,)})):
                vararg = fn.args.vararg.arg if fn.args.vararg else None
                found[fn.name] = _Helper(level, param, index, args[0], tuple(args[1:]), vararg)
                break
    return found


class _AnyName(dict[str, tuple[ast.expr, ...]]):
    """An environment in which every name holds a string: what substitution could change at all."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> tuple[ast.expr, ...]:
        return (ast.Constant(value=""),)

    def get(self, key: str, default: object = None) -> tuple[ast.expr, ...]:  # type: ignore[override]
        return self[key]


def _names_a_message(call: ast.Call) -> bool:
    """Whether a logging call's message has a name in a message position: only then is data flow followed.

    Most modules log literals; following their statements would cost the harvest twice its parse.
    """
    logged = _log_arguments(call)
    if logged is None or not logged[1]:
        return False
    message = logged[1][0]
    return substitute(message, _AnyName()) != [message]


def _mentions(node: ast.AST, marker: ast.AST) -> bool:
    return any(sub is marker for sub in ast.walk(node))


def _helper_call(call: ast.Call, helpers: dict[str, _Helper]) -> tuple[_Helper, ast.expr] | None:
    """The helper a call invokes and the argument given to its logged parameter."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    helper = helpers.get(name) if name else None
    if helper is None:
        return None
    for keyword in call.keywords:
        if keyword.arg == helper.param:
            return helper, keyword.value
    if helper.index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: helper.index + 1]):
        return helper, call.args[helper.index]
    return None


def extract_calls(source: str) -> Extraction:
    """Every logging or print call of a module, each message rendered to a format string."""
    result = Extraction()
    try:
        tree = ast.parse(source)
        nodes = list(ast.walk(tree))
        flow = _Flow()
        if any(_names_a_message(node) for node in nodes if isinstance(node, ast.Call)) or any(
            substitute(raised[1], _AnyName()) != [raised[1]]
            for node in nodes
            if isinstance(node, ast.Raise | ast.Assert) and (raised := _raised(node)) is not None
        ):
            for node in nodes:
                if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    flow.scan(node, node.body)
        helpers = _helpers(nodes, flow)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        result.error = True
        return result
    found: set[tuple[str, str, tuple[str, ...], str]] = set()
    for node in nodes:
        if isinstance(node, ast.FunctionDef) and node.name in TEXT_METHODS:
            returned = [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
            _add(result, found, [("repr", [value]) for value in returned if render_message(value) is not None])
            continue
        if isinstance(node, ast.Raise | ast.Assert):
            raised = _raised(node)
            if raised is not None:
                name, message = raised
                env = flow.env_at.get(id(node.exc if isinstance(node, ast.Raise) else node.test), {})
                _add(result, found, [("raise", [m]) for m in substitute(message, env)], before=f"{name}: ")
            continue
        if not isinstance(node, ast.Call):
            continue
        env = flow.env_at.get(id(node), {})
        target = _call_target(node)
        messages: list[tuple[str, list[ast.expr]]] = []
        if target is not None:
            level, args = target
            if not args:
                result.skipped += level != "print"
                continue
            if level == "print" and len(args) > 1:
                messages = [(level, args)]
            elif len(args) == 2 and _is_str(args[0]) and args[0].value == "%s" and _held(args[1], env):  # type: ignore[attr-defined]
                messages = [(level, [m]) for m in substitute(args[1], env)]  # logger.info("%s", msg)
            else:
                messages = [(level, [m, *args[1:]]) for m in substitute(args[0], env)]
        else:
            invoked = _helper_call(node, helpers)
            if invoked is None:
                continue
            helper, argument = invoked
            values = tuple(substitute(argument, env))
            messages = [
                (helper.level, [m, *helper.arguments(node)]) for m in substitute(helper.message, {helper.param: values})
            ]
        _add(result, found, messages)
    result.calls.sort(key=lambda c: (c["format"], c["style"], c["args"], c["level"]))
    return result


#: what an exception's class is named like: its message is printed behind the name (``ValueError: ...``)
_EXCEPTION_NAME = re.compile(r"[A-Z]\w*(?:Error|Exception)")


def _raised(node: ast.Raise | ast.Assert) -> tuple[str, ast.expr] | None:
    """The exception class and message of ``raise SomeError(message)`` or ``assert test, message`` (None: no such).

    The traceback's last line is ``SomeError: message``, which the server's logger prints too when it
    logs the failure (vLLM's engine core: ``ERROR ... [core.py:935] ValueError: ...``). A raise with
    more than the message (``SomeError(message, code)``) prints a tuple, which no one reads as a wording.
    """
    if isinstance(node, ast.Assert):
        return None if node.msg is None else ("AssertionError", node.msg)
    call = node.exc
    if not isinstance(call, ast.Call) or len(call.args) != 1 or call.keywords:
        return None
    name = _receiver_name(call.func)
    if name is None or not _EXCEPTION_NAME.fullmatch(name) or isinstance(call.args[0], ast.Starred):
        return None
    return name, call.args[0]


def _add(
    result: Extraction,
    found: set[tuple[str, str, tuple[str, ...], str]],
    messages: list[tuple[str, list[ast.expr]]],
    before: str = "",
) -> None:
    """Renders each message of one call and adds the new ones; one that is no string is counted as skipped.

    ``before`` is literal text printed before the message (an exception's name).
    """
    for level, args in messages:
        rendered = _render_call(level, args)
        if rendered is None:
            result.skipped += 1
            continue
        if before:
            text = _escape_braces(before) if rendered.style == "fstring" else before
            rendered = Rendered(text + rendered.text, rendered.style, rendered.args)
        ident = (rendered.text, rendered.style, rendered.args, level)
        if ident not in found:
            found.add(ident)
            result.calls.append(
                {"format": rendered.text, "style": rendered.style, "args": list(rendered.args), "level": level}
            )


def _render_call(level: str, args: list[ast.expr]) -> Rendered | None:
    """The format string of one logging or print call's arguments, or None when it has no string message."""
    if not args:
        return None
    if level == "print" and len(args) > 1:
        if any(isinstance(a, ast.Starred) for a in args):
            return None
        if not any(_is_str(a) or isinstance(a, ast.JoinedStr) for a in args):
            return None
        return _join_parts(args, " ")
    rendered = render_message(args[0])
    if rendered is not None and level != "print" and len(args) > 1:
        extra = tuple(_src(a) for a in args[1:])
        style = "percent" if rendered.style == "plain" else rendered.style
        rendered = Rendered(rendered.text, style, rendered.args + extra)
    return rendered


def is_memory_format(fmt: str, args: Iterable[str] = ()) -> bool:
    """Whether a format (its literal text, expression sources and args) concerns memory."""
    return bool(MEMORY_RE.search(fmt)) or any(MEMORY_RE.search(a) for a in args)


def wanted_path(path: str, package: str) -> bool:
    """A `.py` under the package, outside tests, benchmarks and examples."""
    if not path.endswith(".py"):
        return False
    parts = path.split("/")
    if parts[0] != package or len(parts) < 2:
        return False
    return not any(part in SKIPPED_DIRS or part.startswith("benchmark") for part in parts[:-1])


# --------------------------------------------------------------------------- zip by ranges


@dataclass(frozen=True)
class ZipEntry:
    """A central-directory record: enough to locate and check one member."""

    name: str
    crc: int
    csize: int
    usize: int
    method: int
    offset: int
    name_len: int

    @property
    def key(self) -> str:
        return member_key(self.name, self.crc, self.usize)


def member_key(path: str, crc: int, size: int) -> str:
    return f"{path}:{crc:08x}:{size}"


class RangeZip:
    """A zip read through `read_range(start, end)` (end exclusive), never whole.

    The reader is injected so tests use a local file and production HTTP ranges.
    """

    EOCD_SIG = b"PK\x05\x06"
    ZIP64_LOCATOR_SIG = b"PK\x06\x07"
    ZIP64_EOCD_SIG = b"PK\x06\x06"
    CD_SIG = b"PK\x01\x02"
    LOCAL_SIG = b"PK\x03\x04"

    def __init__(self, read_range: Callable[[int, int], bytes], size: int) -> None:
        self.read_range = read_range
        self.size = size
        self.entries = self._read_central_directory()

    def _read_central_directory(self) -> list[ZipEntry]:
        tail_len = min(self.size, 65536 + 22 + 20)
        tail_start = self.size - tail_len
        tail = self.read_range(tail_start, self.size)
        pos = tail.rfind(self.EOCD_SIG)
        while pos >= 0 and pos + 22 > len(tail):
            pos = tail.rfind(self.EOCD_SIG, 0, pos)
        if pos < 0:
            raise HarvestError("not a zip: no end-of-central-directory record")
        (_, _, _, _, count, cd_size, cd_offset, _) = struct.unpack("<4sHHHHIIH", tail[pos : pos + 22])
        loc = pos - 20
        if loc >= 0 and tail[loc : loc + 4] == self.ZIP64_LOCATOR_SIG:
            (_, _, z64_offset, _) = struct.unpack("<4sIQI", tail[loc : loc + 20])
            if z64_offset >= tail_start:
                rec = tail[z64_offset - tail_start : z64_offset - tail_start + 56]
            else:
                rec = self.read_range(z64_offset, z64_offset + 56)
            if rec[:4] != self.ZIP64_EOCD_SIG:
                raise HarvestError("bad ZIP64 end-of-central-directory record")
            (_, _, _, _, _, _, _, count, cd_size, cd_offset) = struct.unpack("<4sQHHIIQQQQ", rec)
        if cd_offset >= tail_start and cd_offset + cd_size <= self.size:
            cd = tail[cd_offset - tail_start : cd_offset - tail_start + cd_size]
        else:
            cd = self.read_range(cd_offset, cd_offset + cd_size)
        return list(self._parse_cd(cd, count))

    def _parse_cd(self, cd: bytes, count: int) -> Iterator[ZipEntry]:
        pos = 0
        for _ in range(count):
            if cd[pos : pos + 4] != self.CD_SIG:
                raise HarvestError("corrupt central directory")
            fields = struct.unpack("<4sHHHHHHIIIHHHHHII", cd[pos : pos + 46])
            flags, method, crc, csize, usize = fields[3], fields[4], fields[7], fields[8], fields[9]
            nlen, elen, clen, offset = fields[10], fields[11], fields[12], fields[16]
            raw_name = cd[pos + 46 : pos + 46 + nlen]
            extra = cd[pos + 46 + nlen : pos + 46 + nlen + elen]
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
            if 0xFFFFFFFF in (csize, usize, offset):
                usize, csize, offset = self._zip64_extra(extra, usize, csize, offset)
            pos += 46 + nlen + elen + clen
            yield ZipEntry(name, crc, csize, usize, method, offset, nlen)

    @staticmethod
    def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
        i = 0
        while i + 4 <= len(extra):
            tag, ln = struct.unpack("<HH", extra[i : i + 4])
            if tag == 0x0001:
                data = extra[i + 4 : i + 4 + ln]
                j = 0
                if usize == 0xFFFFFFFF:
                    usize = struct.unpack("<Q", data[j : j + 8])[0]
                    j += 8
                if csize == 0xFFFFFFFF:
                    csize = struct.unpack("<Q", data[j : j + 8])[0]
                    j += 8
                if offset == 0xFFFFFFFF:
                    offset = struct.unpack("<Q", data[j : j + 8])[0]
                break
            i += 4 + ln
        return usize, csize, offset

    @staticmethod
    def _span(entry: ZipEntry) -> tuple[int, int]:
        # the local extra field is not in the central directory; a slack covers the usual ones
        return entry.offset, entry.offset + 30 + entry.name_len + entry.csize + LOCAL_SLACK

    def plan(
        self, entries: Iterable[ZipEntry], max_gap: int = MAX_GAP, max_span: int = MAX_SPAN
    ) -> list[list[ZipEntry]]:
        """Groups entries so that each group is one range request."""
        groups: list[list[ZipEntry]] = []
        start = end = -1
        for entry in sorted(entries, key=lambda e: e.offset):
            lo, hi = self._span(entry)
            if groups and lo - end < max_gap and hi - start <= max_span:
                groups[-1].append(entry)
                end = max(end, hi)
            else:
                groups.append([entry])
                start, end = lo, hi
        return groups

    def read_group(self, group: list[ZipEntry]) -> dict[str, bytes]:
        """Reads a planned group with one range request (plus one per oversized local extra)."""
        lo = group[0].offset
        hi = min(self.size, max(self._span(e)[1] for e in group))
        blob = self.read_range(lo, hi)
        out: dict[str, bytes] = {}
        for entry in group:
            rel = entry.offset - lo
            header = blob[rel : rel + 30]
            if header[:4] != self.LOCAL_SIG:
                raise HarvestError(f"bad local header for {entry.name}")
            nlen, elen = struct.unpack("<HH", header[26:30])
            data_start = rel + 30 + nlen + elen
            data = blob[data_start : data_start + entry.csize]
            if len(data) < entry.csize:
                absolute = entry.offset + 30 + nlen + elen
                data = self.read_range(absolute, absolute + entry.csize)
            out[entry.name] = self.decompress(entry, data)
        return out

    @staticmethod
    def decompress(entry: ZipEntry, data: bytes) -> bytes:
        if entry.method == 0:
            raw = data
        elif entry.method == 8:
            raw = zlib.decompressobj(-15).decompress(data)
        else:
            raise HarvestError(f"{entry.name}: unsupported compression method {entry.method}")
        if zlib.crc32(raw) != entry.crc or len(raw) != entry.usize:
            raise HarvestError(f"{entry.name}: CRC or size mismatch")
        return raw


# --------------------------------------------------------------------------- cache


class Cache:
    """On-disk cache: extraction per member key, member keys per release file, whole sdists."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._memo: dict[str, dict[str, Any]] = {}

    def _member_path(self, key: str) -> Path:
        digest = hashlib.sha1(key.encode()).hexdigest()
        return self.root / f"members-v{EXTRACTOR_VERSION}" / digest[:2] / f"{digest}.json"

    def get_member(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        path = self._member_path(key)
        try:
            value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        with self._lock:
            self._memo[key] = value
        return value

    def has_member(self, key: str) -> bool:
        return self.get_member(key) is not None

    def _source_path(self, key: str) -> Path:
        digest = hashlib.sha1(key.encode()).hexdigest()
        return self.root / "sources" / digest[:2] / f"{digest}.py.z"

    def get_source(self, key: str) -> bytes | None:
        """A member's source as fetched once; independent of the extractor's version."""
        try:
            return zlib.decompress(self._source_path(key).read_bytes())
        except (OSError, zlib.error):
            return None

    def put_source(self, key: str, raw: bytes) -> None:
        _atomic_write(self._source_path(key), zlib.compress(raw, 6))

    def put_member(self, key: str, value: dict[str, Any]) -> None:
        _atomic_write(self._member_path(key), json.dumps(value, ensure_ascii=False))
        with self._lock:
            self._memo[key] = value

    def _release_path(self, server: str, filename: str) -> Path:
        return self.root / "releases" / server / f"{filename}.json"

    def get_release(self, server: str, filename: str) -> list[str] | None:
        try:
            keys: list[str] = json.loads(self._release_path(server, filename).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return keys

    def put_release(self, server: str, filename: str, keys: list[str]) -> None:
        _atomic_write(self._release_path(server, filename), json.dumps(sorted(keys)))

    def sdist_path(self, filename: str) -> Path:
        return self.root / "sdists" / filename


def _atomic_write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    if isinstance(text, str):
        tmp.write_text(text, encoding="utf-8")
    else:
        tmp.write_bytes(text)
    tmp.replace(path)


def process_source(key: str, raw: bytes, cache: Cache) -> dict[str, Any]:
    """Extracts one member's calls and caches them, and its source, under its key."""
    value = extract_calls(raw.decode("utf-8", errors="replace")).to_json()
    cache.put_source(key, raw)
    cache.put_member(key, value)
    return value


def reextract(keys: Iterable[str], cache: Cache, processes: int = 1) -> set[str]:
    """Extracts again, from the cached sources, the members this extractor has not seen; returns them.

    Extraction is CPU-bound, so a whole-harvest re-extraction runs in processes.
    """
    todo = sorted({key for key in keys if not cache.has_member(key)})
    if processes > 1 and len(todo) > 100:
        with concurrent.futures.ProcessPoolExecutor(max_workers=processes) as pool:
            done = set(pool.map(_reextract_one, [str(cache.root)] * len(todo), todo, chunksize=64))
        done.discard("")
        return done
    return {key for key in todo if _reextract_one(str(cache.root), key)}


def _reextract_one(root: str, key: str) -> str:
    cache = Cache(Path(root))
    raw = cache.get_source(key)
    if raw is None:
        return ""
    cache.put_member(key, extract_calls(raw.decode("utf-8", errors="replace")).to_json())
    return key


def fetch_zip_members(
    zf: RangeZip, entries: Iterable[ZipEntry], cache: Cache, pool: concurrent.futures.Executor | None = None
) -> int:
    """Extracts the entries not cached yet, reading those whose source is not kept; returns how many.

    A cached key costs no range read at all: that is what makes re-runs and
    unchanged files across releases cheap.
    """
    entries = list(entries)
    local = reextract((e.key for e in entries), cache)
    todo = [e for e in entries if not cache.has_member(e.key)]
    groups = zf.plan(todo)
    if pool is None:
        return len(local) + sum(_read_and_process(zf, g, cache) for g in groups)
    return len(local) + sum(f.result() for f in [pool.submit(_read_and_process, zf, g, cache) for g in groups])


# --------------------------------------------------------------------------- HTTP


class Http:
    """urllib with retries and a byte counter; every failure ends as HarvestError."""

    def __init__(self) -> None:
        self.bytes = 0
        self.requests = 0
        self._lock = threading.Lock()

    def get(self, url: str, headers: dict[str, str] | None = None, expect: int | None = None) -> bytes:
        hdrs = {"User-Agent": USER_AGENT, **(headers or {})}
        last: Exception | None = None
        for attempt in range(RETRIES):
            try:
                req = urllib.request.Request(url, headers=hdrs)
                with urllib.request.urlopen(req, timeout=60) as resp:
                    if expect is not None and resp.status != expect:
                        raise HarvestError(f"{url}: HTTP {resp.status}, expected {expect}")
                    body: bytes = resp.read()
                with self._lock:
                    self.bytes += len(body)
                    self.requests += 1
                return body
            except urllib.error.HTTPError as exc:
                if exc.code not in (408, 425, 429, 500, 502, 503, 504):
                    raise HarvestError(f"{url}: HTTP {exc.code}") from exc
                last = exc
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                last = exc
            time.sleep(min(30.0, 0.5 * 2**attempt))
        raise HarvestError(f"{url}: giving up after {RETRIES} attempts: {last}")

    def range_reader(self, url: str) -> Callable[[int, int], bytes]:
        def read_range(start: int, end: int) -> bytes:
            body = self.get(url, {"Range": f"bytes={start}-{end - 1}"}, expect=206)
            if len(body) != end - start:
                raise HarvestError(f"{url}: asked {end - start} bytes at {start}, got {len(body)}")
            return body

        return read_range


# --------------------------------------------------------------------------- releases


@dataclass(frozen=True)
class Release:
    """One release and the single file read for it."""

    version: str
    filename: str
    url: str
    size: int
    date: str

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")


def _file_version(project: str, filename: str) -> str | None:
    norm = project.replace("-", "_")
    for prefix in (f"{project}-", f"{norm}-"):
        if filename.lower().startswith(prefix.lower()):
            rest = filename[len(prefix) :]
            if filename.endswith(".whl"):
                return rest.split("-")[0]
            for ext in (".tar.gz", ".zip", ".tar.bz2"):
                if rest.endswith(ext):
                    return rest[: -len(ext)]
    return None


def _file_rank(filename: str) -> tuple[int, str] | None:
    """Lower is better: a pure wheel, then an x86_64 manylinux one, then the sdist."""
    if filename.endswith(".whl"):
        if filename.endswith("-py3-none-any.whl") or filename.endswith("-none-any.whl"):
            return (0, filename)
        if "manylinux" in filename and filename.endswith("x86_64.whl"):
            return (1, filename)
        return None
    if filename.endswith(".tar.gz"):
        return (2, filename)
    return None


def pick_releases(project: str, index: dict[str, Any]) -> tuple[list[Release], list[str]]:
    """Non-yanked releases in PEP 440 order, one file each; also versions with no usable file."""
    by_version: dict[str, list[dict[str, Any]]] = {}
    for f in index["files"]:
        if f.get("yanked"):
            continue
        version = _file_version(project, f["filename"])
        if version is not None:
            by_version.setdefault(version, []).append(f)
    releases: list[Release] = []
    unusable: list[str] = []
    for version in index.get("versions", sorted(by_version)):
        ranked = sorted(
            (rank, f["filename"], f) for f in by_version.get(version, []) if (rank := _file_rank(f["filename"]))
        )
        if not ranked:
            if version in by_version:
                unusable.append(version)
            continue
        f = ranked[0][2]
        releases.append(Release(version, f["filename"], f["url"], int(f["size"]), f["upload-time"][:10]))
    releases.sort(key=lambda r: version_key(r.version))
    unusable.sort(key=version_key)
    return releases, unusable


def read_sdist(release: Release, package: str, http: Http, cache: Cache) -> dict[str, bytes]:
    """The wanted `.py` files of an sdist, keyed by their path inside the package."""
    path = cache.sdist_path(release.filename)
    if not path.exists():
        _atomic_write(path, http.get(release.url))
    out: dict[str, bytes] = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            inner = member.name.split("/", 1)[1] if "/" in member.name else member.name
            if wanted_path(inner, package):
                handle = tar.extractfile(member)
                if handle is not None:
                    out[inner] = handle.read()
    return out


@dataclass
class Summary:
    """Numbers a maintainer checks after a run."""

    server: str
    releases: int = 0
    releases_read: int = 0
    unusable: list[str] = field(default_factory=list)
    member_refs: int = 0
    unique_members: int = 0
    fetched: int = 0
    bytes: int = 0
    requests: int = 0
    formats: int = 0
    calls: int = 0
    unparsable: int = 0
    skipped_messages: int = 0
    seconds: float = 0.0

    def lines(self) -> str:
        return (
            f"{self.server}: {self.releases} releases ({self.releases_read} read now, "
            f"{self.releases - self.releases_read} from cache; no usable file: {self.unusable or 'none'})\n"
            f"  members: {self.member_refs} across releases, {self.unique_members} distinct, "
            f"{self.fetched} extracted now, {self.unique_members - self.fetched} from cache\n"
            f"  downloaded {self.bytes / 1e6:.1f} MB in {self.requests} requests, {self.seconds:.0f} s\n"
            f"  {self.calls} distinct logging/print formats, {self.formats} memory formats; "
            f"{self.unparsable} unparsable files, {self.skipped_messages} non-string messages skipped"
        )


def harvest(server: str, cache: Cache, jobs: int) -> tuple[dict[str, Any], Summary]:
    """Reads every release of one server and aggregates its memory formats."""
    started = time.monotonic()
    http = Http()
    index = json.loads(http.get(INDEX_URL.format(project=server), {"Accept": INDEX_ACCEPT}))
    releases, unusable = pick_releases(server, index)
    summary = Summary(server, releases=len(releases), unusable=unusable)
    keys_of: dict[str, list[str]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        pending: list[Release] = []
        known = {r.filename: cache.get_release(server, r.filename) for r in releases}
        summary.fetched += len(
            reextract((k for keys in known.values() if keys for k in keys), cache, os.cpu_count() or 1)
        )
        for r in releases:
            cached = known[r.filename]
            # a release is read again only when a member is neither extracted nor kept as source
            if cached is not None and all(cache.has_member(k) for k in cached):
                keys_of[r.version] = cached
                continue
            pending.append(r)
        summary.releases_read = len(pending)

        def open_release(r: Release) -> tuple[Release, RangeZip | None, dict[str, bytes] | None]:
            if r.is_wheel:
                return r, RangeZip(http.range_reader(r.url), r.size), None
            return r, None, read_sdist(r, server, http, cache)

        opened = list(pool.map(open_release, pending))
        # each uncached member is read from the first release holding it, so a file
        # unchanged across fifty releases costs one read
        claimed: set[str] = set()
        futures: list[concurrent.futures.Future[int]] = []
        for r, zf, files in opened:
            if files is not None:
                keys: list[str] = []
                for path, raw in files.items():
                    key = member_key(path, zlib.crc32(raw), len(raw))
                    keys.append(key)
                    if key not in claimed and not cache.has_member(key):
                        claimed.add(key)
                        futures.append(pool.submit(lambda k=key, b=raw: (process_source(k, b, cache), 1)[1]))
                keys_of[r.version] = keys
                continue
            assert zf is not None
            entries = [e for e in zf.entries if wanted_path(e.name, server)]
            keys_of[r.version] = [e.key for e in entries]
            summary.fetched += len(reextract((e.key for e in entries if e.key not in claimed), cache))
            todo = [e for e in entries if e.key not in claimed and not cache.has_member(e.key)]
            claimed.update(e.key for e in todo)
            for group in zf.plan(todo):
                futures.append(pool.submit(_read_and_process, zf, group, cache))
        summary.fetched += sum(f.result() for f in futures)
        for r, _, _ in opened:
            cache.put_release(server, r.filename, keys_of[r.version])

    doc, counts = aggregate(server, releases, keys_of, cache)
    summary.member_refs = sum(len(k) for k in keys_of.values())
    summary.unique_members = len({k for keys in keys_of.values() for k in keys})
    summary.bytes, summary.requests = http.bytes, http.requests
    summary.formats = len(doc["formats"])
    summary.calls, summary.unparsable, summary.skipped_messages = counts
    summary.seconds = time.monotonic() - started
    return doc, summary


def _read_and_process(zf: RangeZip, group: list[ZipEntry], cache: Cache) -> int:
    contents = zf.read_group(group)
    for entry in group:
        process_source(entry.key, contents[entry.name], cache)
    return len(group)


def aggregate(
    server: str, releases: list[Release], keys_of: dict[str, list[str]], cache: Cache
) -> tuple[dict[str, Any], tuple[int, int, int]]:
    """Folds per-member calls into one record per (format, style, args) across releases."""
    records: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
    all_formats: set[tuple[str, str, tuple[str, ...]]] = set()
    bad: set[str] = set()
    skipped: dict[str, int] = {}
    for order, r in enumerate(releases):
        seen: set[tuple[str, str, tuple[str, ...]]] = set()
        for key in keys_of[r.version]:
            value = cache.get_member(key)
            if value is None:
                raise HarvestError(f"{server} {r.version}: member {key} missing from cache")
            if value["error"]:
                bad.add(key)
            skipped[key] = value["skipped"]
            path = key.rsplit(":", 2)[0]
            for call in value["calls"]:
                ident = (call["format"], call["style"], tuple(call["args"]))
                all_formats.add(ident)
                if not is_memory_format(call["format"], call["args"]):
                    continue
                rec = records.get(ident)
                if rec is None:
                    rec = records[ident] = {
                        "order": order,
                        "files": set(),
                        "levels": {},
                        "first": r,
                        "last": r,
                        "count": 0,
                    }
                rec["files"].add(path)
                rec["levels"][call["level"]] = order
                rec["last"] = r
                if ident not in seen:
                    seen.add(ident)
                    rec["count"] += 1
    formats: list[dict[str, Any]] = []
    ids: dict[str, int] = {}
    for (fmt, style, args), rec in sorted(records.items(), key=lambda kv: (kv[1]["order"], kv[0])):
        levels: dict[str, int] = rec["levels"]
        base = f"{server}:{hashlib.sha1((fmt + chr(0) + style).encode()).hexdigest()[:12]}"
        # the id hashes format and style only, so variants differing in args share it;
        # later ones (by first release, which old releases never change) get a suffix
        ids[base] = ids.get(base, 0) + 1
        formats.append(
            {
                "id": base if ids[base] == 1 else f"{base}-{ids[base]}",
                "format": fmt,
                "style": style,
                "args": list(args),
                # the level of the newest release using it; earlier ones differ rarely
                "level": max(levels, key=lambda lv: (levels[lv], lv)),
                "files": sorted(rec["files"]),
                "first": rec["first"].version,
                "last": rec["last"].version,
                "first_date": rec["first"].date,
                "last_date": rec["last"].date,
                "releases": rec["count"],
            }
        )
    doc = {
        "server": server,
        "filter": MEMORY_FILTER,
        "newest_upload": max((r.date for r in releases), default=""),
        "releases": [r.version for r in releases],
        "formats": formats,
    }
    return doc, (len(all_formats), len(bad), sum(skipped.values()))


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Deterministic output, so a re-run with no new release leaves no diff."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--server", choices=[*SERVERS, "all"], default="all")
    parser.add_argument("--out", type=Path, default=Path("formats"))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kvlog-harvest")
    parser.add_argument("--jobs", type=int, default=16)
    ns = parser.parse_args(argv)
    cache = Cache(ns.cache)
    servers = SERVERS if ns.server == "all" else (ns.server,)
    for server in servers:
        try:
            doc, summary = harvest(server, cache, max(1, ns.jobs))
        except HarvestError as exc:
            print(f"harvest_formats: {server}: {exc}", file=sys.stderr)
            return 2
        write_json(ns.out / f"{server}.json", doc)
        print(summary.lines(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
