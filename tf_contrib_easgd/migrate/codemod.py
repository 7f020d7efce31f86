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
* the same names taken from a local copy of contrib's module (`from elastic_average_optimizer
  import ElasticAverageOptimizer`, `import my_easgd as eao` + `eao.ElasticAverageOptimizer`),
  with a note; a module that defines `class ElasticAverageOptimizer` itself (the copy) is
  left alone and reported as a copy to delete;
* `tf.device(<device function>)` -> `tf.compat.v1.device(...)`: TF 2's `tf.device`
  refuses functions such as `replica_device_setter(...)`. An argument is left alone only
  when it is provably a string; for strings both calls behave the same;
* `tf.layers.X` -> `tf.compat.v1.layers.X` (TF 2 has no `tf.layers`), imports too; and
  for a script using `tf.compat.v1.layers` or `tf.compat.v1.nn.rnn_cell`, which need Keras 2
  (tf-keras) on TensorFlow 2.16+, `os.environ["TF_USE_LEGACY_KERAS"] = "1"` before its first
  import that may load TensorFlow;
* in a module that builds TF1 graphs: `tf.Variable(...)` (and TF's internal
  `variables.Variable(...)`) -> `tf.compat.v1.Variable(...)`, since a resource variable
  cannot be a global step under `disable_v2_behavior()`; and, unless the module uses TF 2's
  summary API, `tf.summary.scalar/histogram/image/audio/text` -> `tf.compat.v1.summary.*`
  (TF 2's ops write nothing to `merge_all()` and a `FileWriter`). TF1-only `tf.summary`
  names move everywhere;
* `tf.compat.v1.disable_v2_behavior()` once after the imports of a script (a module with
  `if __name__ == "__main__":`) that builds TF1 graphs and does not pick a mode itself.

What it cannot convert (any other `tf.contrib` use, a contrib import still in use) is
returned as findings with line numbers of the migrated text, with the hand edit to make for
the common ones; notes tell what a library module's program or the user must do.
"""

import dataclasses

import libcst as cst
import libcst.matchers
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import legacy_keras, tf1_apis
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, RENAMES, Finding

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
# The same, reached through TensorFlow's internal modules (`tensorflow.python.*`).
_INTERNAL_GRAPH_APIS = frozenset(api.rpartition(".")[2] for api in _GRAPH_APIS)
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
        findings: `contrib_names.Finding`s, what could not be converted, in line order.
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
    scan = tf1_apis.Scan.of(module)
    if scan.copy_class_line:
        return Migration(code=source, findings=(Finding(scan.copy_class_line, _COPY_NOTE),))
    facts = _Facts.of(module)
    facts.builds_graphs |= bool(scan.copies)
    needs = tf1_apis.ImportNeeds(facts.module_aliases)
    legacy = tf1_apis.LegacyApiRewriter(scan, needs, facts.builds_graphs)
    module = MetadataWrapper(module).visit(legacy)
    module = MetadataWrapper(module).visit(_Rewriter(facts, needs))
    module = names.remove_unused_contrib_imports(module, copies=scan.copies)
    module = _insert_after_imports(module, facts, needs)
    module, findings = legacy_keras.ensure_legacy_keras(module, facts.is_script)
    to_final = tf1_apis.line_mapper(source, module.code)
    findings += [
        dataclasses.replace(finding, line=to_final(finding.line))
        for finding in legacy.findings + legacy.copy_findings()
    ]
    findings += names.leftover_findings(module)
    library = facts.builds_graphs and not facts.is_script and not facts.picks_mode
    if library and module.code != source:
        findings.append(_LIBRARY_NOTE)
    findings.sort(key=lambda finding: finding.line)
    return Migration(code=module.code, findings=tuple(findings))


# A migrated module that builds graphs but is not a script: its program must pick TF1 mode.
_LIBRARY_NOTE = Finding(
    1,
    "builds TF1 graphs but is not a script (no `if __name__ == '__main__':`): call "
    "tf.compat.v1.disable_v2_behavior() once at the start of the program that uses it.",
    unconverted=False,
)
# A module that defines contrib's classes itself: a copy of contrib's module.
_COPY_NOTE = (
    "defines ElasticAverageOptimizer or ElasticAverageCustomGetter itself: this looks like a "
    f"local copy of contrib's elastic_average_optimizer.py, which {PACKAGE} replaces. It was "
    "left as it is: delete it once nothing imports it (easgd-migrate points the imports of "
    f"the files it migrates at {PACKAGE}); if it was changed, compare it with {PACKAGE} first."
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
                or (
                    name.startswith("tensorflow.python.")
                    and name.rpartition(".")[2] in _INTERNAL_GRAPH_APIS
                )
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

    def __init__(self, facts, needs):
        super().__init__()
        self._facts = facts
        self._needs = needs
        self._in_import = 0

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
                package = cst.Name(self._needs.package_name())
                return cst.Attribute(value=package, attr=cst.Name(RENAMES[name]))
        return updated_node

    def leave_Call(self, original_node, updated_node):
        raw = {q.name for q in self.get_metadata(QualifiedNameProvider, original_node.func, set())}
        if "tensorflow.device" not in raw or not updated_node.args:
            return updated_node
        if self._is_string(updated_node.args[0].value, depth=3):
            return updated_node
        func = updated_node.func
        # Keep the script's own spelling of `tensorflow`; `device(...)` was imported from it.
        if isinstance(func, cst.Attribute):
            base = func.value
        else:
            base = cst.Name(self._needs.tensorflow_name())
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
        return names.split_line(updated_node, self._split_import_from)

    @staticmethod
    def _split_import_from(node):
        """Splits `from <contrib> import ...` into (what stays, the part for this package)."""
        if not isinstance(node, cst.ImportFrom):
            return node, None
        module = names.normalize(names.import_module_name(node) or "")
        if module not in (names.CONTRIB_OPT, names.CONTRIB_MODULE):
            return node, None
        if isinstance(node.names, cst.ImportStar):
            if module == names.CONTRIB_OPT:  # Other optimizers too: it stays, and is listed.
                return node, None
            return None, node.with_changes(module=cst.Name(PACKAGE))
        ours = {
            alias.evaluated_name: RENAMES[f"{module}.{alias.evaluated_name}"]
            for alias in node.names
            if f"{module}.{alias.evaluated_name}" in RENAMES
        }
        return names.split_import(node, ours)


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
    """Returns `body` with `statements` before `body[index]`, keeping the lines around tidy.

    A blank line goes after them when the last one has lines above it; at the top of the
    module, the comments of the first statement stay on top.
    """
    rest = list(body[index:])
    if rest and statements[-1].leading_lines:  # Set apart: a blank line after it too.
        first = rest[0]
        if not first.leading_lines or first.leading_lines[0].comment is not None:
            rest[0] = first.with_changes(leading_lines=[cst.EmptyLine(), *first.leading_lines])
    if index == 0 and rest:
        first = statements[0].with_changes(leading_lines=rest[0].leading_lines)
        statements = [first, *statements[1:]]
        rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine()])
    return [*body[:index], *statements, *rest]


def _insert_after_imports(module, facts, needs):
    """Adds the imports the rewrite needs and, for graph scripts, the TF1 mode switch.

    The imports go at the end of the first block of imports (after the docstring if there is
    none); the switch after them, and after the import that binds the name it uses.
    """
    config = module.config_for_parsing
    switch = None
    if facts.is_script and facts.builds_graphs and not facts.picks_mode:
        prefix = needs.compat_v1()
        switch = cst.parse_statement(f"{prefix}.disable_v2_behavior()", config=config)
        switch = switch.with_changes(leading_lines=[cst.EmptyLine()])
    imports = [
        cst.parse_statement(f"import {name}", config=config)
        for name, needed in ((PACKAGE, needs.package), ("tensorflow", needs.tensorflow))
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
