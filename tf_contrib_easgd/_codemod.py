# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Name, leave_Call, ...
"""The source rewrites behind easgd-migrate, on a concrete syntax tree (libcst).

`migrate_source` turns the text of one TF1 module that used contrib's Elastic Averaging SGD
into text that runs on TensorFlow 2 with this package. It keeps formatting and comments,
and running it again on its own output changes nothing. It rewrites:

* attribute access to contrib's EASGD names through any alias of `tensorflow` (or of a
  contrib module): `tf.contrib.opt.ElasticAverageOptimizer` ->
  `tf_contrib_easgd.ElasticAverageOptimizer`, and the same for
  `tf.contrib.opt.python.training.elastic_average_optimizer.X`; `import tf_contrib_easgd`
  is added once, and contrib imports left unused are removed;
* `from tensorflow.contrib.opt[.python.training.elastic_average_optimizer] import ...` of
  those names -> `from tf_contrib_easgd import ...` (other names stay where they were);
* `tf.device(<device function>)` -> `tf.compat.v1.device(...)`: TF 2's `tf.device`
  refuses functions such as `replica_device_setter(...)`. An argument is left alone only
  when it is provably a string; for strings both calls behave the same;
* `tf.compat.v1.disable_v2_behavior()` once after the imports of a script (a module with
  `if __name__ == "__main__":`) that builds TF1 graphs and does not pick a mode itself.

What it cannot convert (any other `tf.contrib` use, a contrib import still in use) is
returned as findings with line numbers of the migrated text.
"""

import dataclasses

import libcst as cst
import libcst.matchers
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

from tf_contrib_easgd import _contrib_names as names
from tf_contrib_easgd._contrib_names import PACKAGE, RENAMES, Finding

# TF1 APIs that only work while building a graph (after `tensorflow.` or
# `tensorflow.compat.v1.`). A script using one of them, or EASGD, needs graph mode.
_GRAPH_APIS = frozenset(
    {
        "placeholder",
        "Session",
        "InteractiveSession",
        "get_variable",
        "variable_scope",
        "get_default_graph",
        "global_variables_initializer",
        "local_variables_initializer",
        "train.MonitoredTrainingSession",
        "train.MonitoredSession",
        "train.SingularMonitoredSession",
        "train.Supervisor",
        "train.Saver",
        "train.replica_device_setter",
    }
)
_MODE_SWITCHES = frozenset(
    {
        "disable_v2_behavior",
        "enable_v2_behavior",
        "disable_eager_execution",
        "enable_eager_execution",
    }
)


@dataclasses.dataclass(frozen=True)
class Migration:
    """The result of `migrate_source`.

    Attributes:
        code: the migrated source text (equal to the input when nothing changed).
        findings: `_contrib_names.Finding`s, what could not be converted, in line order.
    """

    code: str
    findings: tuple


def migrate_source(source):
    """Migrates the text of one Python module.

    Args:
        source: the module's source code, a `str`.

    Returns:
        A `Migration`.

    Raises:
        TypeError: if `source` is not a `str`.
        libcst.ParserSyntaxError: if `source` is not valid Python.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}: {source!r:.80}")
    module = cst.parse_module(source)
    facts = _Facts.of(module)
    rewriter = _Rewriter(facts)
    module = MetadataWrapper(module).visit(rewriter)
    module = names.remove_unused_contrib_imports(module)
    module = _insert_after_imports(module, facts, rewriter)
    findings = names.leftover_findings(module)
    library = facts.builds_graphs and not facts.is_script and not facts.picks_mode
    if library and module.code != source:
        findings.insert(0, _LIBRARY_NOTE)
    return Migration(code=module.code, findings=tuple(findings))


# A migrated module that builds graphs but is not a script: its program must pick TF1 mode.
_LIBRARY_NOTE = Finding(
    1,
    "builds TF1 graphs but is not a script (no `if __name__ == '__main__':`): call "
    "tf.compat.v1.disable_v2_behavior() once at the start of the program that uses it.",
    unconverted=False,
)


@dataclasses.dataclass
class _Facts:
    """What the migration needs to know about a module before changing it.

    Attributes:
        module_aliases: dotted module -> name bound to it by a top-level `import`.
        string_values: variable name -> the expressions assigned to it anywhere.
        is_script: whether the module has `if __name__ == "__main__":`.
        builds_graphs: whether it uses TF1 graph APIs or EASGD.
        picks_mode: whether it already enables or disables TF 2 behaviour itself.
    """

    module_aliases: dict
    string_values: dict
    is_script: bool = False
    builds_graphs: bool = False
    picks_mode: bool = False

    @classmethod
    def of(cls, module):
        wrapper = MetadataWrapper(module)
        collector = _FactCollector()
        wrapper.visit(collector)
        return collector.facts


class _FactCollector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self):
        super().__init__()
        self.facts = _Facts(module_aliases={}, string_values={})
        self._depth = 0  # Indented blocks around the node.
        self._defs = 0  # Functions and classes around the node.

    def visit_IndentedBlock(self, node):
        self._depth += 1

    def leave_IndentedBlock(self, original_node):
        self._depth -= 1

    def visit_ClassDef(self, node):
        self._defs += 1

    def leave_ClassDef(self, original_node):
        self._defs -= 1

    def leave_FunctionDef(self, original_node):
        self._defs -= 1

    def visit_Import(self, node):
        if self._defs:
            return  # Module-level imports only, including those in `try:` or `if`.
        for alias in node.names:
            if alias.evaluated_alias:
                self.facts.module_aliases.setdefault(alias.evaluated_name, alias.evaluated_alias)
            else:
                top = alias.evaluated_name.split(".")[0]
                self.facts.module_aliases.setdefault(top, top)

    def visit_Assign(self, node):
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.facts.string_values.setdefault(target.target.value, []).append(node.value)

    def visit_FunctionDef(self, node):
        self._defs += 1
        self.facts.string_values.setdefault(node.name.value, []).append(node)

    def visit_If(self, node):
        if self._depth == 0 and _is_main_guard(node.test):
            self.facts.is_script = True

    def visit_Attribute(self, node):
        self._note_api(node)

    def visit_Name(self, node):
        self._note_api(node)

    def _note_api(self, node):
        for name in names.qualified_names(self, node):
            short = name.removeprefix("tensorflow.")
            if name.startswith("tensorflow.") and short in _MODE_SWITCHES:
                self.facts.picks_mode = True
            if (
                (name.startswith("tensorflow.") and short in _GRAPH_APIS)
                or name in RENAMES
                or name.startswith(PACKAGE + ".")
            ):
                self.facts.builds_graphs = True


def _is_main_guard(test):
    """Whether `test` is `__name__ == "__main__"` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    sides = sorted(
        (type(side).__name__, getattr(side, "value", "")) for side in (test.left, target.comparator)
    )
    return isinstance(target.operator, cst.Equal) and sides in (
        [("Name", "__name__"), ("SimpleString", '"__main__"')],
        [("Name", "__name__"), ("SimpleString", "'__main__'")],
    )


class _Rewriter(cst.CSTTransformer):
    """Rewrites EASGD names, contrib imports of them, and `tf.device(function)`."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, facts):
        super().__init__()
        self._facts = facts
        self.needs_package = False
        self.needs_tensorflow = False
        self._in_import = 0

    def tensorflow_name(self):
        """Returns the name bound to `tensorflow` here, noting when it must be imported."""
        alias = self._facts.module_aliases.get("tensorflow")
        if alias is None:
            self.needs_tensorflow = True
            alias = "tensorflow"
        return alias

    def visit_Import(self, node):
        self._in_import += 1

    def leave_Import(self, original_node, updated_node):
        self._in_import -= 1
        return updated_node

    def visit_ImportFrom(self, node):
        self._in_import += 1

    def leave_ImportFrom(self, original_node, updated_node):
        self._in_import -= 1
        return updated_node

    def leave_Attribute(self, original_node, updated_node):
        if self._in_import:
            return updated_node
        for name in names.qualified_names(self, original_node):
            if name in RENAMES:
                alias = self._facts.module_aliases.get(PACKAGE)
                self.needs_package |= alias is None
                return cst.Attribute(value=cst.Name(alias or PACKAGE), attr=cst.Name(RENAMES[name]))
        return updated_node

    def leave_Call(self, original_node, updated_node):
        raw = {q.name for q in self.get_metadata(QualifiedNameProvider, original_node.func, set())}
        if "tensorflow.device" not in raw or not updated_node.args:
            return updated_node
        if self._is_string(updated_node.args[0].value, depth=3):
            return updated_node
        func = updated_node.func
        # Keep the script's own spelling of `tensorflow`; `device(...)` was imported from it.
        base = func.value if isinstance(func, cst.Attribute) else cst.Name(self.tensorflow_name())
        for attr in ("compat", "v1", "device"):
            base = cst.Attribute(value=base, attr=cst.Name(attr))
        return updated_node.with_changes(func=base)

    def _is_string(self, node, depth):  # noqa: PLR0911 -- one return per expression kind.
        """Whether `node` is provably a device string (or None), following `depth` names."""
        if isinstance(node, cst.SimpleString | cst.ConcatenatedString | cst.FormattedString):
            return True
        if isinstance(node, cst.Name):
            values = self._facts.string_values.get(node.value, ())
            return node.value == "None" or (
                depth > 0 and bool(values) and all(self._is_string(v, depth - 1) for v in values)
            )
        if isinstance(node, cst.BinaryOperation):
            return isinstance(node.operator, cst.Modulo | cst.Add) and self._is_string(
                node.left, depth
            )
        if isinstance(node, cst.IfExp):
            return self._is_string(node.body, depth) and self._is_string(node.orelse, depth)
        if isinstance(node, cst.Attribute):
            return node.attr.value == "device"  # `variable.device`, `op.device`.
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            return method == "to_string" or (
                method in ("format", "join") and self._is_string(node.func.value, depth)
            )
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            return node.func.value == "str"
        return False

    def leave_SimpleStatementLine(self, original_node, updated_node):
        body, added = [], []
        for statement in updated_node.body:
            kept, ours = statement, None
            if isinstance(statement, cst.ImportFrom):
                kept, ours = self._split_import_from(statement)
            body += [kept] if kept is not None else []
            added += [ours] if ours is not None else []
        if not added:
            return updated_node
        if not body:
            return updated_node.with_changes(body=_fix_semicolons(added))
        return cst.FlattenSentinel(
            [
                updated_node.with_changes(body=_fix_semicolons(body)),
                cst.SimpleStatementLine(body=_fix_semicolons(added)),
            ]
        )

    def _split_import_from(self, node):
        """Splits `from <contrib> import ...` into (what stays, the part for this package)."""
        module = names.normalize(names.import_module_name(node) or "")
        if module not in (names.CONTRIB_OPT, names.CONTRIB_MODULE):
            return node, None
        package = cst.Name(PACKAGE)
        if isinstance(node.names, cst.ImportStar):
            return (
                (None, node.with_changes(module=package))
                if module == names.CONTRIB_MODULE
                else (
                    node,
                    None,
                )
            )
        ours, others = [], []
        for alias in node.names:
            new_name = RENAMES.get(f"{module}.{alias.evaluated_name}")
            if new_name is None:
                others.append(alias)
                continue
            asname = alias.asname
            if asname is None and new_name != alias.evaluated_name:
                asname = cst.AsName(name=cst.Name(alias.evaluated_name))  # Keep the bound name.
            ours.append(alias.with_changes(name=cst.Name(new_name), asname=asname))
        if not ours:
            return node, None
        if not others:
            return None, node.with_changes(module=package, names=names.fix_commas(ours, node))
        return (
            node.with_changes(names=names.fix_commas(others, node)),
            cst.ImportFrom(module=package, names=names.fix_commas(ours, None)),
        )


def _fix_semicolons(statements):
    """Drops a semicolon after the last small statement of a line."""
    return [*statements[:-1], statements[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]


def _is_import_line(statement):
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
    )


def _is_docstring(statement):
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def _binds(statement, name):
    """Whether a top-level `statement` (or a block inside it) imports something as `name`."""
    if isinstance(statement, cst.FunctionDef | cst.ClassDef):
        return False
    for node in libcst.matchers.findall(statement, libcst.matchers.Import()):
        for alias in node.names:
            if (alias.evaluated_alias or alias.evaluated_name.split(".")[0]) == name:
                return True
    for node in libcst.matchers.findall(statement, libcst.matchers.ImportFrom()):
        if not isinstance(node.names, cst.ImportStar) and any(
            (alias.evaluated_alias or alias.evaluated_name) == name for alias in node.names
        ):
            return True
    return False


def _insert(body, index, statements):
    """Inserts `statements` before `body[index]`, keeping the lines around them tidy."""
    rest = body[index:]
    if rest and statements[-1].leading_lines:  # Set apart: a blank line after it too.
        first = rest[0]
        if not first.leading_lines or first.leading_lines[0].comment is not None:
            rest[0] = first.with_changes(leading_lines=[cst.EmptyLine(), *first.leading_lines])
    if index == 0 and rest:
        # Nothing above: the first statement's comments stay on top, then a blank line.
        first = statements[0].with_changes(leading_lines=rest[0].leading_lines)
        statements = [first, *statements[1:]]
        rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine()])
    return [*body[:index], *statements, *rest]


def _insert_after_imports(module, facts, rewriter):
    """Adds the imports the rewrite needs and, for graph scripts, the TF1 mode switch.

    The imports go at the end of the first block of imports (after the docstring if there is
    none); the switch after them, and after the import that binds the name it uses.
    """
    config = module.config_for_parsing
    switch = None
    if facts.is_script and facts.builds_graphs and not facts.picks_mode:
        if "tensorflow" not in facts.module_aliases and "tensorflow.compat.v1" in (
            facts.module_aliases
        ):
            prefix = facts.module_aliases["tensorflow.compat.v1"]
        else:
            prefix = rewriter.tensorflow_name() + ".compat.v1"
        switch = cst.parse_statement(f"{prefix}.disable_v2_behavior()", config=config)
        switch = switch.with_changes(leading_lines=[cst.EmptyLine()])
    imports = [
        cst.parse_statement(f"import {name}", config=config)
        for name, needed in (
            (PACKAGE, rewriter.needs_package),
            ("tensorflow", rewriter.needs_tensorflow),
        )
        if needed
    ]
    body = list(module.body)
    end = 1 if body and _is_docstring(body[0]) else 0
    while end < len(body) and _is_import_line(body[end]):
        end += 1
    if imports:
        body = _insert(body, end, imports)
        end += len(imports)
    if switch is not None:
        root = prefix.split(".")[0]
        bound = [i + 1 for i, statement in enumerate(body) if _binds(statement, root)]
        body = _insert(body, max([end, *bound[:1]]), [switch])
    return module.with_changes(body=body) if imports or switch is not None else module
