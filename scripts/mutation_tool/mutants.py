"""The mutants of one module: one small AST edit each, spliced into the source text.

Each mutant changes one token or one statement of the original text (the rest of the file, comments
included, stays byte for byte), so its line reads as the reader wrote it. Only behaviour is mutated:
docstrings, annotations, ``if TYPE_CHECKING:`` blocks, ``__all__``, imports and ``@overload`` stubs
never are, and nor is anything inside an f-string (its messages are not behaviour the tool judges).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

#: comparison flips
_COMPARE: dict[type[ast.cmpop], tuple[str, str, str]] = {
    # op: (source pattern, old text, new text)
    ast.Lt: (r"<(?![<=])", "<", "<="),
    ast.LtE: (r"<=", "<=", "<"),
    ast.Gt: (r"(?<![-=])>(?![>=])", ">", ">="),
    ast.GtE: (r">=", ">=", ">"),
    ast.Eq: (r"==", "==", "!="),
    ast.NotEq: (r"!=", "!=", "=="),
    ast.Is: (r"\bis\b", "is", "is not"),
    ast.IsNot: (r"\bis\s+not\b", "is not", "is"),
    ast.In: (r"\bin\b", "in", "not in"),
    ast.NotIn: (r"\bnot\s+in\b", "not in", "in"),
}

#: arithmetic swaps: op -> (its text, the text it becomes, the class it becomes)
_ARITH: dict[type[ast.operator], tuple[str, str, type[ast.operator]]] = {
    ast.Add: ("+", "-", ast.Sub),
    ast.Sub: ("-", "+", ast.Add),
    ast.Mult: ("*", "/", ast.Div),
    ast.Div: ("/", "*", ast.Mult),
    ast.FloorDiv: ("//", "/", ast.Div),
    ast.Mod: ("%", "//", ast.FloorDiv),
    ast.Pow: ("**", "*", ast.Mult),
    ast.LShift: ("<<", ">>", ast.RShift),
    ast.RShift: (">>", "<<", ast.LShift),
    ast.BitAnd: ("&", "|", ast.BitOr),
    ast.BitOr: ("|", "&", ast.BitAnd),
    ast.BitXor: ("^", "&", ast.BitAnd),
}

#: binding strength of the binary operators (a swap within one level is a plain token swap)
_LEVEL: dict[type[ast.operator], int] = {
    ast.BitOr: 1,
    ast.BitXor: 2,
    ast.BitAnd: 3,
    ast.LShift: 4,
    ast.RShift: 4,
    ast.Add: 5,
    ast.Sub: 5,
    ast.Mult: 6,
    ast.Div: 6,
    ast.FloorDiv: 6,
    ast.Mod: 6,
    ast.Pow: 7,
}

#: names that make a subscript or a ``|`` a type expression (a type alias is an annotation kept in a variable)
_TYPE_NAMES = {"Callable", "Literal", "Final", "Optional", "Union", "ClassVar", "Annotated", "Mapping", "Sequence",
               "Iterable", "Iterator", "Generator", "MutableMapping", "MutableSequence", "Awaitable", "Coroutine",
               "AsyncIterator", "AsyncGenerator", "TypeAlias", "TypeGuard", "Collection", "Set", "AbstractSet",
               "dict", "list", "tuple", "set", "frozenset", "type", "int", "str", "float", "bytes", "bool",
               "object", "complex", "bytearray", "memoryview", "Any", "None"}  # fmt: skip

_DELETABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert, ast.Delete)


@dataclass(frozen=True)
class Edit:
    """Bytes ``start:end`` of the original source become ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Mutant:
    """One mutant of one module; ``key`` names it stably across unrelated edits (no line numbers)."""

    module: str
    key: str
    scope: str
    description: str
    line: int  # first line of the mutated node (for display and coverage)
    first_line: int  # the lines whose coverage says which tests reach it
    last_line: int
    import_time: bool  # runs when the module is imported (module level, class body, decorators, defaults)
    old_line: str
    new_line: str
    edits: tuple[Edit, ...]

    def apply(self, original: bytes) -> bytes:
        """The mutated source."""
        result = original
        for edit in sorted(self.edits, key=lambda e: e.start, reverse=True):
            result = result[: edit.start] + edit.text.encode() + result[edit.end :]
        return result


@dataclass(frozen=True)
class _Candidate:
    scope: str
    description: str
    node: ast.AST
    statement_line: int
    import_time: bool
    edits: tuple[Edit, ...]


class _Finder:
    """Walks one module and yields a candidate per possible edit, in source order."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.line_starts = [0]
        for index, byte in enumerate(source):
            if byte == 0x0A:
                self.line_starts.append(index + 1)

    # positions ------------------------------------------------------------------------------------------------
    def start(self, node: ast.AST) -> int:
        return self.line_starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined, no-any-return]

    def end(self, node: ast.AST) -> int:
        return self.line_starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined, no-any-return]

    def parenthesised(self, node: ast.AST) -> bool:
        """Whether brackets enclose ``node`` right outside its text (any expression fits there)."""
        before = self.source[: self.start(node)].rstrip()
        after = self.source[self.end(node) :].lstrip()
        return before.endswith(b"(") and after.startswith(b")")

    def token_edit(self, left: ast.AST, right: ast.AST, pattern: str, new: str) -> Edit | None:
        """Replace the operator written between ``left`` and ``right`` (comments between them ignored)."""
        begin, finish = self.end(left), self.start(right)
        gap = self.source[begin:finish].decode()
        masked = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), gap)
        match = re.search(pattern, masked)
        if match is None:
            return None
        offset = len(gap[: match.start()].encode())
        length = len(match.group().encode())
        return Edit(begin + offset, begin + offset + length, new)

    # statements -----------------------------------------------------------------------------------------------
    def body(self, statements: list[ast.stmt], scope: str, runtime: bool) -> Iterator[_Candidate]:
        for index, statement in enumerate(statements):
            if index == 0 and _is_docstring(statement):
                continue
            yield from self.statement(statement, scope, runtime)

    def statement(self, node: ast.stmt, scope: str, runtime: bool) -> Iterator[_Candidate]:
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal | ast.Pass):
            return
        if _is_all(node):
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from self.body(node.orelse, scope, runtime)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_name_of(d) == "overload" for d in node.decorator_list):
                return
            for expression in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
                if expression is not None:
                    yield from self.expression(expression, scope, node.lineno, not runtime)
            inner = node.name if scope == "<module>" else f"{scope}.{node.name}"
            yield from self.body(node.body, inner, True)
            return
        if isinstance(node, ast.ClassDef):
            for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
                yield from self.expression(expression, scope, node.lineno, not runtime)
            inner = node.name if scope == "<module>" else f"{scope}.{node.name}"
            yield from self.body(node.body, inner, runtime)
            return
        import_time = not runtime
        line = node.lineno
        bare_annotation = isinstance(node, ast.AnnAssign) and node.value is None  # `x: int` declares, does nothing
        if isinstance(node, _DELETABLE) and not (_is_inert(node) or _is_type_alias(node) or bare_annotation):
            yield _Candidate(scope, "delete statement", node, line, import_time, (self.replace(node, "pass"),))
        if isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            edit = self.replace(node.value, "None")
            yield _Candidate(scope, "return -> return None", node, line, import_time, (edit,))
        if isinstance(node, ast.Break):
            yield _Candidate(scope, "break -> continue", node, line, import_time, (self.replace(node, "continue"),))
        if isinstance(node, ast.Continue):
            yield _Candidate(scope, "continue -> break", node, line, import_time, (self.replace(node, "break"),))
        if isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
            old, new, _ = _ARITH[type(node.op)]
            edit = self.token_edit(node.target, node.value, re.escape(old + "="), new + "=")
            if edit is not None:
                yield _Candidate(scope, f"{old}= -> {new}=", node, line, import_time, (edit,))
        # the expressions of this statement (not those of its nested statements, which come next)
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "type_comment"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.expr):
                    yield from self.expression(child, scope, line, import_time)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                yield from self.body(block, scope, runtime)
        for handler in getattr(node, "handlers", []):
            yield from self.body(handler.body, scope, runtime)
        for case in getattr(node, "cases", []):
            if case.guard is not None:
                yield from self.expression(case.guard, scope, case.guard.lineno, import_time)
            yield from self.body(case.body, scope, runtime)

    def replace(self, node: ast.AST, text: str) -> Edit:
        return Edit(self.start(node), self.end(node), text)

    # expressions ----------------------------------------------------------------------------------------------
    def expression(self, node: ast.expr, scope: str, line: int, import_time: bool) -> Iterator[_Candidate]:
        if isinstance(node, ast.JoinedStr) or _is_type_expression(node):
            return
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for index, op in enumerate(node.ops):
                pattern, old, new = _COMPARE[type(op)]
                edit = self.token_edit(operands[index], operands[index + 1], pattern, new)
                if edit is not None:
                    yield _Candidate(scope, f"{old} -> {new}", node, line, import_time, (edit,))
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            old, new, new_class = _ARITH[type(node.op)]
            if _LEVEL[type(node.op)] == _LEVEL[new_class]:
                found = self.token_edit(node.left, node.right, re.escape(old), new)
                edits = () if found is None else (found,)
            else:  # another binding strength: the whole node, parenthesised, as Python writes it
                swapped = ast.unparse(ast.BinOp(left=node.left, op=new_class(), right=node.right))
                edits = (self.replace(node, swapped if self.parenthesised(node) else f"({swapped})"),)
            if edits:
                yield _Candidate(scope, f"{old} -> {new}", node, line, import_time, edits)
        elif isinstance(node, ast.BoolOp):
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            found = [
                self.token_edit(a, b, rf"\b{old}\b", new) for a, b in zip(node.values, node.values[1:], strict=False)
            ]
            if all(edit is not None for edit in found):
                edits = tuple(edit for edit in found if edit is not None)
                yield _Candidate(scope, f"{old} -> {new}", node, line, import_time, edits)
        elif isinstance(node, ast.Constant):
            if node.value is True or node.value is False:
                old, new = str(node.value), str(not node.value)
                yield _Candidate(scope, f"{old} -> {new}", node, line, import_time, (self.replace(node, new),))
            elif isinstance(node.value, int):
                for value in (node.value + 1, node.value - 1):
                    text = str(value) if value >= 0 else f"({value})"
                    description = f"{node.value} -> {value}"
                    yield _Candidate(scope, description, node, line, import_time, (self.replace(node, text),))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                yield from self.expression(child, scope, line, import_time)


def find_mutants(module: str, source: bytes) -> list[Mutant]:
    """Every mutant of ``source`` (the text of ``module``, a path relative to the project root), in source order."""
    tree = ast.parse(source, filename=module)
    finder = _Finder(source)
    lines = source.decode().splitlines()
    mutants: list[Mutant] = []
    occurrences: dict[str, int] = {}
    for candidate in finder.body(tree.body, "<module>", False):
        node = candidate.node
        old_line = lines[node.lineno - 1].strip()  # type: ignore[attr-defined]
        prefix = f"{module}::{candidate.scope}::{candidate.description}::{old_line}"
        occurrences[prefix] = occurrences.get(prefix, 0) + 1
        mutant = Mutant(
            module=module,
            key=f"{prefix}::{occurrences[prefix]}",
            scope=candidate.scope,
            description=candidate.description,
            line=node.lineno,  # type: ignore[attr-defined]
            first_line=min(candidate.statement_line, node.lineno),  # type: ignore[attr-defined]
            last_line=node.end_lineno,  # type: ignore[attr-defined]
            import_time=candidate.import_time,
            old_line=old_line,
            new_line="",
            edits=candidate.edits,
        )
        mutated = mutant.apply(source)
        try:
            compile(mutated, module, "exec", dont_inherit=True)
        except SyntaxError:
            continue  # an edit that does not parse is no mutant (never expected; skipped rather than run)
        new_line = mutated.decode().splitlines()[mutant.line - 1].strip()
        mutants.append(_with_new_line(mutant, new_line))
    return mutants


def _with_new_line(mutant: Mutant, new_line: str) -> Mutant:
    return Mutant(**{**mutant.__dict__, "new_line": new_line})


def _is_type_expression(node: ast.expr) -> bool:
    """``dict[str, int]``, ``Callable[..., X]``, ``str | None``, ``int | float``: types, not behaviour."""
    if isinstance(node, ast.Subscript):
        return _name_of(node.value) in _TYPE_NAMES
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return any(_is_type_operand(side) for side in (node.left, node.right))
    return False


def _is_type_operand(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    return _name_of(node) in _TYPE_NAMES or _is_type_expression(node)


def _is_type_alias(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _is_type_expression(node.value)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_inert(node: ast.stmt) -> bool:
    """A bare constant (a string used as a comment, ``...``): deleting it changes nothing."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_all(node: ast.stmt) -> bool:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def _is_type_checking(test: ast.expr) -> bool:
    return _name_of(test) == "TYPE_CHECKING"


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None
