# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Name, ...
"""The Keras 2 switch of migrated scripts that use `tf.compat.v1.layers`.

A helper of `tf_contrib_easgd.migrate.codemod`: on TensorFlow 2.16 and later the TF1 layers (and
RNN cells) refuse to run under Keras 3 unless the tf-keras package is installed and
`TF_USE_LEGACY_KERAS=1` is set before TensorFlow is first imported; so does `tf.keras` in TF1
graph code (Keras 3 refuses a reference variable: `Invalid dtype: float32_ref`), which
`tf_upgrade_v2` writes for `tf.contrib.layers.l2_regularizer`. `ensure_legacy_keras` sets it
at the top of a script that needs it, or whose tree modules need it, or notes what a library
module's program must do.
"""

import itertools
import sys

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import Finding
from tf_contrib_easgd.migrate.tf1_apis import from_module, within

# TF1 APIs that need Keras 2 (the tf-keras package) on TensorFlow 2.16 and later.
_KERAS2_APIS = ("tensorflow.layers", "tensorflow.nn.rnn_cell")
# Needs Keras 2 in TF1 graph code only; `keras` alone is Keras 3, whatever the switch says.
_GRAPH_KERAS = "tensorflow.keras"
# Values that are the same in Keras 2 and 3 and touch no variable: no switch for them.
_KERAS_VALUES = ("tensorflow.keras.losses.Reduction", "tensorflow.keras.datasets")
_KERAS3 = "keras"
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
_INSTALL = (
    "install the tf-keras release matching your TensorFlow (pip install 'tf-keras==X.Y.*' "
    "for TensorFlow X.Y, or this project's legacy-keras extra: pip install -c "
    "constraints.txt '.[legacy-keras]' in its checkout)"
)


def ensure_legacy_keras(module, is_script, graph_code=False, context=None):
    """Has a script that uses Keras-2-only TF1 APIs set TF_USE_LEGACY_KERAS=1 first.

    The assignment (after an `import os` when nothing above it imports os) goes before the
    first top-level statement importing anything outside the standard library (any of them
    may import TensorFlow); with no such import, after the docstring and `from __future__`
    imports. A module that is not a script gets a note instead. Nothing is added twice.

    Args:
        module: a `libcst.Module`.
        is_script: whether it is a script (`module_facts.Facts.is_script`).
        graph_code: whether it builds TF1 graphs: its `tf.keras` then needs Keras 2 too.
        context: the module's `project.Context`, or None: a script whose tree modules need
            Keras 2 sets the switch for them; a library whose script sets it gets no note.

    Returns:
        (the module, a list of `Finding`s with lines of the returned module).
    """
    line, api = keras2_use(module, graph_code)
    keras2_import = context.keras2_import if context and is_script else ""
    if not line and not keras2_import:
        return module, []
    if api == "tf.keras" and _uses_keras3(module):
        note = (
            "tf.keras in TF1 graph code needs Keras 2 (Keras 3 refuses a reference variable: "
            "ValueError: Invalid dtype: float32_ref), but this module also uses the keras "
            "package, Keras 3, which TF_USE_LEGACY_KERAS=1 would not switch: the two Keras "
            "would mix, so easgd-migrate set nothing. Replace the tf.keras use in the graph "
            "code (a regularizer: `lambda w: SCALE * tf.nn.l2_loss(w)`), or move the Keras 3 "
            "code to a program of its own."
        )
        return module, [Finding(line, note)]
    if not is_script:
        if context and context.keras2_script:
            note = (
                f"uses {api}, which needs Keras 2 on TensorFlow 2.16 and later: "
                f"{context.keras2_script}, which imports this module, sets "
                f"{LEGACY_KERAS}=1 before it imports TensorFlow; {_INSTALL}."
            )
            return module, [Finding(line, note, unconverted=False)]
        note = (
            f"uses {api}, which needs Keras 2 on TensorFlow 2.16 and later: the program "
            f'that imports this module must set os.environ["{LEGACY_KERAS}"] = "1" before it '
            f"first imports TensorFlow, and {_INSTALL}."
        )
        return module, [Finding(line, note, unconverted=False)]
    body = list(module.body)
    index = _first_outside_import(body)
    above = cst.Module(body[:index])
    if LEGACY_KERAS not in [s.evaluated_value for s in m.findall(above, m.SimpleString())]:
        module = module.with_changes(body=_set_legacy_keras(module, body, index, above))
        line, api = keras2_use(module, graph_code)
    if line:
        uses = f"uses {api}, which needs"
    else:
        line = _switch_line(module)
        uses = f"imports {keras2_import}, which need"
    note = (
        f"{uses} Keras 2 on TensorFlow 2.16 and later: {_INSTALL}. The script sets "
        f"{LEGACY_KERAS}=1 before it imports TensorFlow."
    )
    return module, [Finding(line, note, unconverted=False)]


def _switch_line(module):
    """The line of the statement setting TF_USE_LEGACY_KERAS in `module`, or 1."""
    wrapper = versions.wrapper(module)
    positions = wrapper.resolve(PositionProvider)
    for statement in wrapper.module.body:
        strings = m.findall(statement, m.SimpleString())
        if isinstance(statement, cst.SimpleStatementLine) and LEGACY_KERAS in [
            s.evaluated_value for s in strings
        ]:
            return positions[statement].start.line
    return 1


def _uses_keras3(module):
    """Whether `module` uses the keras package itself (Keras 3 on TensorFlow 2.16+)."""
    visitor = _Keras2Uses(graph_code=False, keras3=True)
    versions.wrapper(module).visit(visitor)
    return bool(visitor.uses)


def _set_legacy_keras(module, body, index, above):
    """Returns `body` with `[import os;] os.environ[...] = "1"` before `body[index]`.

    The blank lines above `body[index]` go above the new statements; its comments stay.
    """
    config = module.config_for_parsing
    lead = body[index].leading_lines if index < len(body) else ()
    blank = list(itertools.takewhile(lambda line: line.comment is None, lead))
    comment = cst.EmptyLine(
        comment=cst.Comment("# tf.compat.v1 layers need Keras 2 (tf-keras), set before TF loads.")
    )
    assign = cst.parse_statement(f'os.environ["{LEGACY_KERAS}"] = "1"', config=config)
    imports = [alias for node in m.findall(above, m.Import()) for alias in node.names]
    if any(alias.evaluated_name == "os" and not alias.asname for alias in imports):
        added = [assign.with_changes(leading_lines=[*(blank or [cst.EmptyLine()]), comment])]
    else:
        os_import = cst.parse_statement("import os", config=config)
        added = [
            os_import.with_changes(leading_lines=blank),
            assign.with_changes(leading_lines=[cst.EmptyLine(), comment]),
        ]
    if index < len(body):
        rest = [cst.EmptyLine(), *lead[len(blank) :]]
        added.append(body[index].with_changes(leading_lines=rest))
    return [*body[:index], *added, *body[index + 1 :]]


def keras2_use(module, graph_code=False, wrapper=None):
    """Returns (line, API) of the first use of a Keras-2-only TF1 API, or (0, '').

    Args:
        module: a `libcst.Module`.
        graph_code: whether the module builds TF1 graphs: `tf.keras` counts then.
        wrapper: a `MetadataWrapper` of `module` to reuse, with the metadata it has
            resolved already; by default that of `versions.wrapper`.
    """
    # The last part of each API's name (`layers`, `rnn_cell`, `keras`) is in its uses.
    words = [api.rpartition(".")[2] for api in _keras2_apis(graph_code)]
    if not versions.mentions(wrapper.module if wrapper else module, words):
        return (0, "")
    visitor = _Keras2Uses(graph_code)
    (wrapper or versions.wrapper(module)).visit(visitor)
    return min(visitor.uses, default=(0, ""))


def _keras2_apis(graph_code):
    """The names whose uses need Keras 2: `tf.keras` counts in graph code only."""
    return (*_KERAS2_APIS, *([_GRAPH_KERAS] if graph_code else []))


class _Keras2Uses(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self, graph_code, keras3=False):
        super().__init__()
        self.uses = []  # (line, API as the user spells it).
        self._inner = set()  # ids of nodes that are the `.value` of an Attribute.
        self._apis = (_KERAS3,) if keras3 else _keras2_apis(graph_code)

    def on_visit(self, node):
        if isinstance(node, cst.Attribute):
            self._inner.add(id(node.value))  # Judged by its whole chain: `tf.keras.x.y`.
        if id(node) in self._inner:
            return True
        for q in self.get_metadata(QualifiedNameProvider, node, ()):
            name = names.normalize(q.name)
            if any(within(name, value) for value in _KERAS_VALUES):
                continue
            for api in self._apis:
                if within(name, api):
                    line = self.get_metadata(PositionProvider, node).start.line
                    spelled = api.replace("tensorflow", "tf", 1)
                    if api in _KERAS2_APIS:
                        spelled = spelled.replace("tf.", "tf.compat.v1.", 1)
                    self.uses.append((line, spelled))
        return True


def _first_outside_import(body):
    """The index in `body` of the first statement importing from outside the standard library.

    Functions and classes are passed over. Without such a statement: the index after the
    docstring and `from __future__` imports.
    """
    for index, statement in enumerate(body):
        if isinstance(statement, cst.FunctionDef | cst.ClassDef):
            continue
        imports = m.findall(statement, m.Import())
        modules = [alias.evaluated_name for node in imports for alias in node.names]
        modules += [from_module(node) for node in m.findall(statement, m.ImportFrom())]
        if any(name.split(".")[0] not in sys.stdlib_module_names for name in modules):
            return index
    index = 0
    while index < len(body) and m.matches(
        body[index],
        m.SimpleStatementLine(
            body=[m.Expr(m.SimpleString()) | m.ImportFrom(module=m.Name("__future__"))]
        ),
    ):
        index += 1
    return index
