"""Drift primitives: parameterised AST transforms that break a working script the way library drift does.

Each primitive finds its *sites* with ``ast`` and rewrites exactly their source spans
(``durable_rollouts.drift_repair.source_edits``), so comments and layout survive and the oracle diff back to the
original touches only the broken lines. The primitives, their parameters and categories: docs/drift_repair.md.
``apply_spec`` raises ``DriftSpecError`` for an unknown primitive, bad parameters, a script that does not parse, or a
spec that changes nothing.

Invariants:
* whether a breakage is *valid* (the script really fails) is decided by running it, never assumed;
* ``candidates`` lists, per primitive, the parameter sets the seeded baseline may choose: only sites on code that
  runs unconditionally (not under ``if``/``while``/``try`` handlers/short-circuits, the main guard excepted) and only
  changes that raise when reached (a name that does not exist, a keyword the callee rejects, a required argument
  removed, a module that does not exist, arguments whose swap is a type error).
"""

from __future__ import annotations

import ast
import keyword
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, ClassVar, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

from durable_rollouts.contracts.drift_repair import DriftCategory, DriftSpec
from durable_rollouts.drift_repair.source_edits import SourceEdit, SourceText, apply_edits, node_span, replace_node


class DriftSpecError(ValueError):
    """A spec that cannot be applied to this script (the message says why)."""


def _identifier(value: str) -> str:
    if not value.isidentifier() or keyword.iskeyword(value):
        raise ValueError(f"{value!r} is not a Python identifier")
    return value


def _dotted(value: str) -> str:
    for part in value.split("."):
        _identifier(part)
    return value


Identifier = Annotated[str, AfterValidator(_identifier)]
Dotted = Annotated[str, AfterValidator(_dotted)]
RENAME_STYLES = ("{}_v2", "{}_legacy", "new_{}", "{}_ex")
MODULE_MOVES = ("{}.compat", "{}_legacy", "{}.v2")
# Callees whose two positional arguments, swapped, are a type error for the usual argument types.
SWAP_RAISES = frozenset(
    {
        "isinstance",
        "getattr",
        "hasattr",
        "int",
        "format",
        "enumerate",
        "rjust",
        "ljust",
        "center",
        "nlargest",
        "nsmallest",
        "islice",
        "bisect",
        "bisect_left",
        "bisect_right",
        "insort",
        "strptime",
        "split",
        "rsplit",
    }
)
# Callees that accept arbitrary keywords, so renaming one raises nothing.
ANY_KEYWORD = frozenset({"dict", "update", "partial", "defaultdict", "OrderedDict", "Counter", "SimpleNamespace"})


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Breakage(NamedTuple):
    script: str
    sites: int


def callee_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def owner_text(node: ast.AST) -> str:
    """``json`` for ``json.dumps``, ``os.path`` for ``os.path.join``: the owner as normalised source."""
    return ast.unparse(node.value) if isinstance(node, ast.Attribute) else ""


def _dotted_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and _dotted_name(node.value))


def _is_main_guard(node: ast.If) -> bool:
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def conditional_nodes(tree: ast.AST) -> set[int]:
    """Ids of nodes that may not run when the script runs (branches, handlers, short-circuits, loop ``else``)."""
    doubtful: set[int] = set()

    def mark(nodes: Sequence[ast.AST]) -> None:
        for node in nodes:
            doubtful.update(id(sub) for sub in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.If) and not _is_main_guard(node):
            mark([*node.body, *node.orelse])
        elif isinstance(node, ast.IfExp):
            mark([node.body, node.orelse])
        elif isinstance(node, (ast.While, ast.For, ast.AsyncFor)):
            mark(node.orelse + (node.body if isinstance(node, ast.While) else []))
        elif isinstance(node, ast.Try):
            mark([*node.handlers, *node.orelse])
        elif isinstance(node, ast.BoolOp):
            mark(node.values[1:])
        elif isinstance(node, ast.comprehension):
            mark(node.ifs)
        elif isinstance(node, ast.Match):
            mark(node.cases)
        elif isinstance(node, ast.Assert) and node.msg is not None:
            mark([node.msg])
    return doubtful


def sure_calls(tree: ast.AST) -> Iterator[ast.Call]:
    doubtful = conditional_nodes(tree)
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call) and id(node) not in doubtful)


def _functions(tree: ast.AST) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    found: dict[str, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, []).append(node)
    return found


def _dataclass_fields(tree: ast.AST) -> dict[str, dict[str, bool]]:
    """For each ``@dataclass`` class: field name -> whether it has a default."""
    found: dict[str, dict[str, bool]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
            found[node.name] = {
                stmt.target.id: stmt.value is not None
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
    return found


class Primitive(ABC):
    name: ClassVar[str]
    category: ClassVar[DriftCategory]
    params_model: ClassVar[type[Params]]
    summary: ClassVar[str]

    @abstractmethod
    def edits(self, tree: ast.Module, text: SourceText, params: Any) -> list[SourceEdit]:
        """The span rewrites this spec makes (empty: the spec matches nothing)."""

    @abstractmethod
    def candidates(self, tree: ast.Module, rng: random.Random) -> list[dict[str, Any]]:
        """Parameter sets the seeded baseline may pick (see the module docstring), in a deterministic order."""


def _width(text: str) -> int:
    """Columns in ``ast`` positions are UTF-8 byte offsets."""
    return len(text.encode("utf-8"))


def _tail_edit(node: ast.expr, old: str, new: str, text: SourceText) -> SourceEdit | None:
    """Replace the trailing ``old`` of an attribute or name node's span with ``new``."""
    _, (end_line, end_col) = node_span(node)
    start = (end_line, end_col - _width(old))
    if text.segment(start, (end_line, end_col)) != old:
        return None
    return SourceEdit(start, (end_line, end_col), new)


class RenameApiCallParams(Params):
    old: Identifier
    new: Identifier
    owner: str | None = None

    @model_validator(mode="after")
    def _changes(self) -> RenameApiCallParams:
        if self.old == self.new:
            raise ValueError("old and new must differ")
        return self


class RenameApiCall(Primitive):
    name = "RenameApiCall"
    category = "api_rename"
    params_model = RenameApiCallParams
    summary = "rename the function or method called (calls whose callee's last name is `old`, optionally on `owner`)"

    def edits(self, tree: ast.Module, text: SourceText, params: RenameApiCallParams) -> list[SourceEdit]:
        owner = _normal(params.owner)
        found = []
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            if callee_name(call) == params.old and (owner is None or owner_text(call.func) == owner):
                edit = _tail_edit(call.func, params.old, params.new, text)
                if edit is not None:
                    found.append(edit)
        return found

    def candidates(self, tree: ast.Module, rng: random.Random) -> list[dict[str, Any]]:
        seen: dict[tuple[str, str | None], dict] = {}
        for call in sure_calls(tree):
            old = callee_name(call)
            if old is None or old.startswith("__"):
                continue
            owner = (
                owner_text(call.func)
                if isinstance(call.func, ast.Attribute) and _dotted_name(call.func.value)
                else None
            )
            if isinstance(call.func, ast.Attribute) and owner is None:
                continue
            key = (old, owner)
            if key not in seen:
                seen[key] = {"old": old, "new": rng.choice(RENAME_STYLES).format(old)} | (
                    {"owner": owner} if owner else {}
                )
        return list(seen.values())


def _normal(owner: str | None) -> str | None:
    if owner is None or not owner.strip():
        return None
    try:
        return ast.unparse(ast.parse(owner.strip(), mode="eval").body)
    except SyntaxError:
        return owner.strip()


class RenameKeywordArgParams(Params):
    function: Identifier
    old: Identifier
    new: Identifier

    @model_validator(mode="after")
    def _changes(self) -> RenameKeywordArgParams:
        if self.old == self.new:
            raise ValueError("old and new must differ")
        return self


class RenameKeywordArg(Primitive):
    name = "RenameKeywordArg"
    category = "kwarg_change"
    params_model = RenameKeywordArgParams
    summary = "rename keyword argument `old` to `new` in calls to `function`"

    def edits(self, tree: ast.Module, text: SourceText, params: RenameKeywordArgParams) -> list[SourceEdit]:
        found = []
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and callee_name(n) == params.function):
            for kw in call.keywords:
                if kw.arg == params.old:
                    start = (kw.lineno, kw.col_offset)
                    end = (kw.lineno, kw.col_offset + _width(params.old))
                    if text.segment(start, end) == params.old:
                        found.append(SourceEdit(start, end, params.new))
        return found

    def candidates(self, tree: ast.Module, rng: random.Random) -> list[dict[str, Any]]:
        functions = _functions(tree)
        seen: dict[tuple[str, str], dict] = {}
        for call in sure_calls(tree):
            function = callee_name(call)
            if function is None or function in ANY_KEYWORD or any(f.args.kwarg for f in functions.get(function, [])):
                continue
            for kw in call.keywords:
                if kw.arg is not None and (function, kw.arg) not in seen:
                    seen[(function, kw.arg)] = {
                        "function": function,
                        "old": kw.arg,
                        "new": rng.choice(RENAME_STYLES).format(kw.arg),
                    }
        return list(seen.values())


class RemoveKeywordArgParams(Params):
    function: Identifier
    name: Identifier


def _argument_nodes(call: ast.Call) -> list[ast.expr | ast.keyword]:
    return sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))


class RemoveKeywordArg(Primitive):
    name = "RemoveKeywordArg"
    category = "kwarg_change"
    params_model = RemoveKeywordArgParams
    summary = "remove keyword argument `name` (and its value) from calls to `function`"

    def edits(self, tree: ast.Module, text: SourceText, params: RemoveKeywordArgParams) -> list[SourceEdit]:
        found = []
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and callee_name(n) == params.function):
            arguments = _argument_nodes(call)
            for index, node in enumerate(arguments):
                if isinstance(node, ast.keyword) and node.arg == params.name:
                    start, end = node_span(node)
                    if index > 0:
                        start = node_span(arguments[index - 1])[1]
                    elif index + 1 < len(arguments):
                        end = node_span(arguments[index + 1])[0]
                    found.append(SourceEdit(start, end, ""))
        return found

    def candidates(self, tree: ast.Module, rng: random.Random) -> list[dict[str, Any]]:
        required = self._required_keywords(tree)
        seen: dict[tuple[str, str], dict] = {}
        for call in sure_calls(tree):
            function = callee_name(call)
            if function is None:
                continue
            for kw in call.keywords:
                if kw.arg is not None and kw.arg in required.get(function, set()):
                    seen.setdefault((function, kw.arg), {"function": function, "name": kw.arg})
        return list(seen.values())

    @staticmethod
    def _required_keywords(tree: ast.Module) -> dict[str, set[str]]:
        """Per function or dataclass defined in the script: the parameters a call must pass (no default, no ``**``)."""
        required: dict[str, set[str]] = {}
        for name, defs in _functions(tree).items():
            sets: list[set[str]] = []
            for f in defs:
                if f.args.kwarg is not None:
                    sets.append(set())
                    continue
                positional = [*f.args.posonlyargs, *f.args.args]
                without_default = positional[: len(positional) - len(f.args.defaults)]
                names = {a.arg for a in without_default if a not in f.args.posonlyargs}
                names |= {a.arg for a, d in zip(f.args.kwonlyargs, f.args.kw_defaults, strict=True) if d is None}
                sets.append(names - {"self", "cls"})
            required[name] = set.intersection(*sets)
        for name, fields in _dataclass_fields(tree).items():
            required[name] = {field for field, has_default in fields.items() if not has_default}
        return required


class MoveImportPathParams(Params):
    old_module: Dotted
    new_module: Dotted

    @model_validator(mode="after")
    def _changes(self) -> MoveImportPathParams:
        if self.old_module == self.new_module:
            raise ValueError("old_module and new_module must differ")
        return self


class MoveImportPath(Primitive):
    name = "MoveImportPath"
    category = "import_move"
    params_model = MoveImportPathParams
    summary = "import from `new_module` instead of `old_module` (`import old` and `from old import ...`)"

    def edits(self, tree: ast.Module, text: SourceText, params: MoveImportPathParams) -> list[SourceEdit]:
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name != params.old_module:
                        continue
                    if alias.asname:
                        end = (alias.lineno, alias.col_offset + _width(alias.name))
                        found.append(SourceEdit((alias.lineno, alias.col_offset), end, params.new_module))
                    elif "." not in alias.name:
                        found.append(replace_node(alias, f"{params.new_module} as {alias.name}"))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == params.old_module:
                edit = self._from_module_edit(node, params, text)
                if edit is not None:
                    found.append(edit)
        return found

    @staticmethod
    def _from_module_edit(node: ast.ImportFrom, params: MoveImportPathParams, text: SourceText) -> SourceEdit | None:
        statement = text.node_text(node)
        head = statement[len("from") :]
        gap = len(head) - len(head.lstrip())
        if not statement.startswith("from") or not head[gap:].startswith(params.old_module):
            return None
        column = node.col_offset + len("from") + _width(head[:gap])
        if "\n" in head[:gap]:
            return None
        return SourceEdit((node.lineno, column), (node.lineno, column + _width(params.old_module)), params.new_module)

    def candidates(self, tree: ast.Module, rng: random.Random) -> list[dict[str, Any]]:
        doubtful = conditional_nodes(tree)
        modules: dict[str, dict] = {}
        for node in ast.walk(tree):
            if id(node) in doubtful:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.asname or "." not in a.name]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module != "__future__":
                names = [node.module]
            else:
                continue
            for module in names:
                modules.setdefault(
                    module, {"old_module": module, "new_module": rng.choice(MODULE_MOVES).format(module)}
                )
        return list(modules.values())


class ReorderPositionalArgsParams(Params):
    function: Identifier
    order: list[int]

    @model_validator(mode="after")
    def _permutation(self) -> ReorderPositionalArgsParams:
        if sorted(self.order) != list(range(len(self.order))) or len(self.order) < 2:
            raise ValueError("order must be a permutation of 0..n-1 with n >= 2")
        if self.order == sorted(self.order):
            raise ValueError("order must differ from the identity")
        return self


class ReorderPositionalArgs(Primitive):
    name = "ReorderPositionalArgs"
    category = "argument_order"
    params_model = ReorderPositionalArgsParams
    summary = (
        "reorder the positional arguments of calls to `function` that pass exactly len(order) of them: new i-th "
        "= old order[i]-th"
    )

    def edits(self, tree: ast.Module, text: SourceText, params: ReorderPositionalArgsParams) -> list[SourceEdit]:
        found = []
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and callee_name(n) == params.function):
            args = call.args
            if len(args) != len(params.order) or any(isinstance(a, ast.Starred) for a in args):
                continue
            originals = [text.node_text(a) for a in args]
            start, end = node_span(args[0])[0], node_span(args[-1])[1]
            base = text.offset(start)
            pieces, cursor = [], base
            for arg, source in zip(args, (originals[j] for j in params.order), strict=True):
                arg_start, arg_end = (text.offset(p) for p in node_span(arg))
                pieces += [text.data[cursor:arg_start].decode("utf-8"), source]
                cursor = arg_end
            rewritten = "".join(pieces)
            if rewritten != text.segment(start, end):
                found.append(SourceEdit(start, end, rewritten))
        return found

    def candidates(self, tree: ast.Module, rng: random.Random) -> list[dict[str, Any]]:
        typed = self._typed_swaps(tree)
        seen: dict[str, dict] = {}
        for call in sure_calls(tree):
            function = callee_name(call)
            if function is None or any(isinstance(a, ast.Starred) for a in call.args) or function in seen:
                continue
            n = len(call.args)
            if function in typed and typed[function][0] == n:
                order = list(range(n))
                i, j = typed[function][1]
                order[i], order[j] = order[j], order[i]
                seen[function] = {"function": function, "order": order}
            elif function in SWAP_RAISES and n == 2:
                seen[function] = {"function": function, "order": [1, 0]}
        return list(seen.values())

    @staticmethod
    def _typed_swaps(tree: ast.Module) -> dict[str, tuple[int, tuple[int, int]]]:
        """Functions defined once in the script with two positional parameters of different annotated types."""
        swaps = {}
        for name, defs in _functions(tree).items():
            if len(defs) != 1:
                continue
            params = [a for a in [*defs[0].args.posonlyargs, *defs[0].args.args] if a.arg not in ("self", "cls")]
            annotations = [ast.unparse(a.annotation) if a.annotation else None for a in params]
            pair = next(
                (
                    (i, j)
                    for i in range(len(params))
                    for j in range(i + 1, len(params))
                    if annotations[i] and annotations[j] and annotations[i] != annotations[j]
                ),
                None,
            )
            if pair is not None:
                swaps[name] = (len(params), pair)
        return swaps


class ChangeAttributeAccessParams(Params):
    old: Identifier
    new: Identifier
    owner: str | None = None

    @model_validator(mode="after")
    def _changes(self) -> ChangeAttributeAccessParams:
        if self.old == self.new:
            raise ValueError("old and new must differ")
        return self


def _attribute_reads(tree: ast.AST) -> Iterator[ast.Attribute]:
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return (
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and id(n) not in called
    )


class ChangeAttributeAccess(Primitive):
    name = "ChangeAttributeAccess"
    category = "attribute_change"
    params_model = ChangeAttributeAccessParams
    summary = "read attribute `new` instead of `old` (non-call reads like `math.pi` or `p.name`, optionally on `owner`)"

    def edits(self, tree: ast.Module, text: SourceText, params: ChangeAttributeAccessParams) -> list[SourceEdit]:
        owner = _normal(params.owner)
        found = []
        for node in _attribute_reads(tree):
            if node.attr == params.old and (owner is None or owner_text(node) == owner):
                edit = _tail_edit(node, params.old, params.new, text)
                if edit is not None:
                    found.append(edit)
        return found

    def candidates(self, tree: ast.Module, rng: random.Random) -> list[dict[str, Any]]:
        doubtful = conditional_nodes(tree)
        seen: dict[tuple[str, str], dict] = {}
        for node in _attribute_reads(tree):
            if id(node) in doubtful or node.attr.startswith("__") or not _dotted_name(node.value):
                continue
            key = (node.attr, owner_text(node))
            if key not in seen:
                seen[key] = {"old": node.attr, "new": rng.choice(RENAME_STYLES).format(node.attr), "owner": key[1]}
        return list(seen.values())


PRIMITIVES: dict[str, Primitive] = {
    p.name: p
    for p in (
        RenameApiCall(),
        RenameKeywordArg(),
        RemoveKeywordArg(),
        MoveImportPath(),
        ReorderPositionalArgs(),
        ChangeAttributeAccess(),
    )
}


def parse_script(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        raise DriftSpecError(f"the script does not parse: {error}") from None


def apply_spec(source: str, spec: DriftSpec) -> Breakage:
    """The script with ``spec`` applied; ``DriftSpecError`` unless it changes at least one site."""
    primitive = PRIMITIVES.get(spec.primitive_type)
    if primitive is None:
        raise DriftSpecError(f"unknown primitive {spec.primitive_type!r}; known: {', '.join(PRIMITIVES)}")
    try:
        params = primitive.params_model.model_validate(spec.params)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in error.errors())
        raise DriftSpecError(f"{spec.primitive_type} params: {problems}") from None
    text = SourceText(source)
    edits = primitive.edits(parse_script(source), text, params)
    try:
        broken = apply_edits(text, edits) if edits else source
    except ValueError as error:
        raise DriftSpecError(f"{spec.primitive_type}: {error}") from None
    if broken == source:
        raise DriftSpecError(f"{spec.primitive_type} {spec.params} matches nothing in the script")
    return Breakage(broken, len(edits))
