# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Assign, leave_With.
"""The getter's variable creator scope, added where Keras layers or `tf.Variable` need it.

A helper of `tf_contrib_easgd.migrate.codemod`. Keras layers and `tf.Variable` make their
variables without calling a variable scope's custom getter (contrib's `minimize` then
failed with a `KeyError`); inside `getter.variable_creator_scope()` they get a worker copy
and centres as `get_variable`'s do. In a module that uses Keras or `tf.Variable`, each
`with` that enters `variable_scope(..., custom_getter=G)` for an EASGD getter `G` gets
`G.variable_creator_scope()` as its next item, with a note. docs/DESIGN.md ("Keras layers").
"""

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, Finding

_GETTER = f"{PACKAGE}.ElasticAverageCustomGetter"
_VARIABLE_SCOPES = frozenset({"tensorflow.variable_scope"})
# What makes variables without get_variable: Keras (tf.keras, tf-keras, Keras 3) and the
# Variable classes, however imported.
_MAKERS = ("tensorflow.keras.", "keras.", "tf_keras.")
_VARIABLE_CLASSES = frozenset({"tensorflow.Variable", "tensorflow.python.ops.variables.Variable"})
CREATOR_SCOPE = "variable_creator_scope"
NOTE = (
    "`{getter}.variable_creator_scope()` was added to this `with`: this module makes "
    "variables with Keras or tf.Variable, which do not call a variable scope's custom getter "
    "(with contrib, minimize failed on them with a KeyError); inside it they get a worker "
    "copy and centres as get_variable's do. Variables made in functions called here are "
    "covered too, in this graph and thread."
)


def add_creator_scopes(module):
    """Returns `module` with the getter's creator scope added where it is needed, and the
    notes (`Finding`s with lines of `module`)."""
    if not versions.mentions(module, ["ElasticAverageCustomGetter"]):
        return module, []  # No getter to find.
    wrapper = versions.wrapper(module)
    scan = _Scan()
    wrapper.visit(scan)
    if not (scan.getters and scan.makes_variables):
        return module, []
    rewriter = _AddScopes(scan.getters)
    return versions.transform(module, rewriter), rewriter.findings


class _Scan(cst.CSTVisitor):
    """The names bound to EASGD getters, and whether anything makes variables otherwise."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self):
        super().__init__()
        self.getters = set()
        self.makes_variables = False

    def visit_Assign(self, node):
        if isinstance(node.value, cst.Call) and _GETTER in self._names(node.value.func):
            self.getters |= {
                target.target.value
                for target in node.targets
                if isinstance(target.target, cst.Name)
            }

    def visit_Attribute(self, node):
        self._note_maker(node)

    def visit_Name(self, node):
        self._note_maker(node)

    def _note_maker(self, node):
        for name in self._names(node):
            if name.startswith(_MAKERS) or name in _VARIABLE_CLASSES:
                self.makes_variables = True

    def _names(self, node):
        return names.qualified_names(self, node)


class _AddScopes(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self, getters):
        super().__init__()
        self._getters = getters
        self.findings = []

    def leave_With(self, original_node, updated_node):
        items = list(updated_node.items)
        for index, item in enumerate(original_node.items):
            getter = self._scoped_getter(item.item)
            if getter is None or _has_creator_scope(items, getter):
                continue
            scope = cst.WithItem(
                item=cst.Call(
                    func=cst.Attribute(value=cst.Name(getter), attr=cst.Name(CREATOR_SCOPE))
                ),
                comma=items[index].comma,
            )
            items[index] = items[index].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            items.insert(index + 1, scope)
            line = self.get_metadata(PositionProvider, original_node).start.line
            self.findings.append(Finding(line, NOTE.format(getter=getter), unconverted=False))
            return updated_node.with_changes(items=items)
        return updated_node

    def _scoped_getter(self, expression):
        """The getter name of `variable_scope(..., custom_getter=NAME)`, or None."""
        if not isinstance(expression, cst.Call):
            return None
        if not names.qualified_names(self, expression.func) & _VARIABLE_SCOPES:
            return None
        for arg in expression.args:
            if (
                arg.keyword is not None
                and arg.keyword.value == "custom_getter"
                and isinstance(arg.value, cst.Name)
                and arg.value.value in self._getters
            ):
                return arg.value.value
        return None


def _has_creator_scope(items, getter):
    """Whether one of `items` is `getter.variable_creator_scope()` already."""
    for item in items:
        call = item.item
        if (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Name)
            and call.func.value.value == getter
            and call.func.attr.value == CREATOR_SCOPE
        ):
            return True
    return False
