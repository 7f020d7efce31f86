# ruff: noqa: N802 -- libcst dispatches on the node class names: leave_Attribute, leave_Import, ...
"""`tf.contrib.slim` -> the tf-slim package (`import tf_slim as slim`), where that is the same API.

A helper of `tf_contrib_easgd.migrate.codemod`, run before the module's facts are read (so
that `slim.learning.train` is seen as tf-slim's). tf-slim 1.1.0 is `tf.contrib.slim` moved
out of TensorFlow: same names, same arguments. Rewritten: `import tensorflow.contrib.slim as
X`, `from tensorflow.contrib import slim`, `from tensorflow.contrib.slim[.nets] import ...`,
`X = tf.contrib.slim`, a `tf.contrib.slim` chain, and contrib.framework's `arg_scope` and
`add_arg_scope`, which slim exports too. Paths into contrib's internals
(`tensorflow.contrib.slim.python.slim...`) are left, and listed with the hand edit. On
TensorFlow 2.16 and later tf-slim's `batch_norm` fails; each use gets a note with the
workaround (docs/MIGRATING.md, "tf-slim on TensorFlow 2.16 and later").
"""

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import Finding
from tf_contrib_easgd.migrate.import_aware import ImportAwareTransformer
from tf_contrib_easgd.migrate.import_block import add_imports
from tf_contrib_easgd.migrate.tf1_apis import from_module

SLIM = "tensorflow.contrib.slim"
PACKAGE = "tf_slim"
# contrib names (qualified, `tensorflow.compat.v1.` read as `tensorflow.`) -> tf-slim's.
_SAME = {
    SLIM: PACKAGE,
    "tensorflow.contrib.framework.arg_scope": f"{PACKAGE}.arg_scope",
    "tensorflow.contrib.framework.add_arg_scope": f"{PACKAGE}.add_arg_scope",
}
_NETS = ("alexnet", "inception", "overfeat", "resnet_utils", "resnet_v1", "resnet_v2", "vgg")
# Module paths under tf.contrib.slim that tf-slim has under the same names.
_MODULES = {SLIM, f"{SLIM}.nets", *(f"{SLIM}.nets.{net}" for net in _NETS)}
# tf-slim 1.1.0 functions that fail on TensorFlow 2.16 and later (tf_keras moved the layer
# batch_norm loads; TensorFlow's control_flow_ops no longer exports the cond it calls).
_BROKEN = frozenset({f"{PACKAGE}.batch_norm", f"{PACKAGE}.layers.batch_norm"})
MOVED_NOTE = (
    "tf.contrib.slim became the tf-slim package (`import tf_slim`, same API): pip install "
    "tf-slim==1.1.0 (this project's legacy-keras extra has it)."
)
BATCH_NORM_NOTE = (
    "tf-slim 1.1.0's batch_norm fails on TensorFlow 2.16 and later: ModuleNotFoundError: No "
    "module named 'tf_keras.legacy_tf_layers' (the layer moved to tf_keras.src), and with "
    "is_training a tensor AttributeError: module 'tensorflow.python.ops.control_flow_ops' "
    "has no attribute 'cond'. Until tf-slim is fixed, run once before building the model: "
    "`for name in ('legacy_tf_layers', 'legacy_tf_layers.normalization'): "
    "sys.modules.setdefault('tf_keras.' + name, importlib.import_module('tf_keras.src.' + "
    "name))` and `control_flow_ops.cond = tf.compat.v1.cond` (from "
    "tensorflow.python.ops import control_flow_ops); or use "
    "tf.compat.v1.layers.batch_normalization (docs/MIGRATING.md)."
)


def to_tf_slim(module):
    """Rewrites `module`'s tf.contrib.slim to tf-slim.

    Returns:
        (the module, `Finding`s with lines of the returned module's text).
    """
    rewriter = _SlimRewriter()
    if versions.mentions(module, ["contrib"]):  # Every name it rewrites is contrib's.
        module = versions.transform(module, rewriter)
    if rewriter.needs_import:
        module = add_imports(module, [f"import {PACKAGE}"])
    if not rewriter.changed:
        return module, _broken_uses(module)
    return module, [
        Finding(rewriter.first_line, MOVED_NOTE, unconverted=False),
        *_broken_uses(module),
    ]


def _broken_uses(module):
    if not versions.mentions(module, ["batch_norm"]):
        return []
    visitor = _BrokenUses()
    versions.wrapper(module).visit(visitor)
    return [Finding(line, BATCH_NORM_NOTE, unconverted=False) for line in visitor.lines]


class _BrokenUses(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self):
        super().__init__()
        self.lines = []

    def visit_Attribute(self, node):
        if names.qualified_names(self, node) & _BROKEN:
            line = self.get_metadata(PositionProvider, node).start.line
            if line not in self.lines:
                self.lines.append(line)


def _tf_slim_module(path):
    """tf-slim's module for the contrib module `path`, or None when it has no such one."""
    path = names.normalize(path)
    return PACKAGE + path.removeprefix(SLIM) if path in _MODULES else None


class _SlimRewriter(ImportAwareTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self):
        super().__init__()
        self.needs_import = False
        self._internal = set()  # ids of `tf.contrib.slim` nodes that lead into `.python`.
        self.changed = False
        self.first_line = 0

    def _mark(self, node):
        line = self.get_metadata(PositionProvider, node).start.line
        self.first_line = min(self.first_line or line, line)
        self.changed = True

    def visit_Attribute(self, node):
        if node.attr.value == "python":  # `tf.contrib.slim.python...`: contrib's internals.
            self._internal.add(id(node.value))

    def visit_Assign(self, node):
        if _assigns_slim(self, node):  # The whole statement becomes an import.
            self._internal.add(id(node.value))

    def leave_Attribute(self, original_node, updated_node):
        if self.in_import or id(original_node) in self._internal:
            return updated_node
        found = [_SAME[n] for n in names.qualified_names(self, original_node) if n in _SAME]
        if not found:
            return updated_node
        self._mark(original_node)
        self.needs_import = True
        return cst.parse_expression(found[0])

    def leave_Import(self, original_node, updated_node):
        updated_node = super().leave_Import(original_node, updated_node)
        aliases = []
        for alias in updated_node.names:
            new = _tf_slim_module(alias.evaluated_name)
            if new is None:
                aliases.append(alias)
            elif alias.asname:
                aliases.append(alias.with_changes(name=cst.parse_expression(new)))
            else:  # `import tensorflow.contrib.slim` binds `tensorflow`; its chains move.
                aliases.append(alias.with_changes(name=cst.Name("tensorflow")))
            if new is not None:
                self._mark(original_node)
        return updated_node.with_changes(names=aliases)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if len(updated_node.body) != 1:
            return updated_node
        statement = updated_node.body[0]
        original = original_node.body[0]
        replacement = None
        if isinstance(original, cst.Assign) and _assigns_slim(self, original):
            replacement = f"import {PACKAGE} as {original.targets[0].target.value}"
        elif isinstance(statement, cst.ImportFrom) and not statement.relative:
            replacement = self._from_import(statement)
        if replacement is None:
            return updated_node
        self._mark(original_node)
        new = cst.parse_statement(replacement)
        return new.with_changes(
            leading_lines=updated_node.leading_lines,
            trailing_whitespace=updated_node.trailing_whitespace,
        )

    def _from_import(self, node):
        """The statement replacing `from <contrib> import ...`, or None to keep it."""
        module = names.normalize(from_module(node))
        if isinstance(node.names, cst.ImportStar):
            new = _tf_slim_module(module)
            return f"from {new} import *" if new else None
        code = ", ".join(cst.Module([]).code_for_node(alias).strip(" ,") for alias in node.names)
        new = _tf_slim_module(module)
        if new is not None:
            return f"from {new} import {code}"
        imported = {alias.evaluated_name for alias in node.names}
        if module == "tensorflow.contrib" and imported == {"slim"}:
            [alias] = node.names
            return f"import {PACKAGE} as {alias.evaluated_alias or 'slim'}"
        if module == "tensorflow.contrib.framework" and imported <= {"arg_scope", "add_arg_scope"}:
            return f"from {PACKAGE} import {code}"
        return None


def _assigns_slim(visitor, node):
    """Whether the `Assign` `node` is `NAME = tf.contrib.slim` (any spelling)."""
    return (
        len(node.targets) == 1
        and isinstance(node.targets[0].target, cst.Name)
        and SLIM in names.qualified_names(visitor, node.value)
    )
