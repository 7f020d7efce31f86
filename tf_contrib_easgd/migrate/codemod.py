# ruff: noqa: N802 -- libcst dispatches on the node class names: leave_Attribute, leave_Call, ...
"""The source rewrites behind easgd-migrate, on a concrete syntax tree (libcst).

`migrate_source` turns the text of one TF1 module that used contrib's Elastic Averaging SGD
into text that runs on TensorFlow 2 with this package, keeping its formatting and comments; a
second run changes nothing. What it cannot convert comes back as findings, with line numbers
of the migrated text. The rewrites, in order, and why: docs/DESIGN.md, "The migration tool".
"""

import dataclasses

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import (
    creator_scopes,
    device_calls,
    estimator_apis,
    global_steps,
    image_apis,
    legacy_keras,
    optimizer_defaults,
    project,
    session_calls,
    slim_apis,
    star_imports,
    tf1_apis,
    versions,
)
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, RENAMES, Finding
from tf_contrib_easgd.migrate.import_aware import ImportAwareTransformer
from tf_contrib_easgd.migrate.import_block import insert_after_imports
from tf_contrib_easgd.migrate.line_map import line_mapper
from tf_contrib_easgd.migrate.module_facts import Facts


@dataclasses.dataclass(frozen=True)
class Migration:
    """The result of `migrate_source`.

    Attributes:
        code: the migrated source text (equal to the input when nothing changed).
        findings: `contrib_names.Finding`s, what could not be converted, in line order.
    """

    code: str
    findings: tuple


def migrate_source(source, keep_tf_session=False, context=None):
    """Migrates the text of one Python module.

    Args:
        source: the module's source code, a `str`.
        keep_tf_session: keep TensorFlow's `MonitoredTrainingSession` in a module that uses
            EASGD (by default it becomes this package's, which keeps a living centre).
        context: what the module's tree tells about it (`project.Context`); None for a
            module migrated on its own (its star imports then count as outside the tree).

    Returns:
        A `Migration`.

    Raises:
        TypeError: if `source` is not a `str`.
        libcst.ParserSyntaxError: if `source` is not valid Python.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}: {source!r:.80}")
    context = context or project.EMPTY
    module = cst.parse_module(source)
    versions.wrapper(module, copy=False)  # Straight from the parser: no copy needed.
    parsed, scan = module, tf1_apis.Scan.of(module)
    if scan.copy_class_line:
        return Migration(code=source, findings=(Finding(scan.copy_class_line, _COPY_NOTE),))
    stars = context.stars or tuple(
        star_imports.StarImport(name, None)
        for name, _ in star_imports.top_level_star_imports(module)
        if name not in scan.copies  # A copy's star import is reported as such.
    )
    module, star_findings = star_imports.bind(module, stars)
    bound = versions.code(module)
    module, slim_findings = slim_apis.to_tf_slim(module)
    noted = [(bound, star_findings), (versions.code(module), slim_findings)]
    if module is not parsed:  # Else the scan above is this module's.
        scan = tf1_apis.Scan.of(module)
    facts = Facts.of(module)
    facts.builds_graphs |= bool(scan.copies)
    facts.uses_easgd |= bool(scan.copies)
    migrated, keras_findings = _rewrite(module, scan, facts, keep_tf_session, context, noted)
    findings = _findings(source, migrated, facts, noted, keras_findings, context)
    if (
        versions.code(migrated) == bound
    ):  # Only the star imports' names were made explicit: no need.
        to_source = line_mapper(bound, source)
        findings = [dataclasses.replace(f, line=to_source(f.line)) for f in findings]
        return Migration(code=source, findings=tuple(findings))
    return Migration(code=versions.code(migrated), findings=tuple(findings))


def _rewrite(module, scan, facts, keep_tf_session, context, noted):
    """Runs the rewrites on `module`, one pass after the other.

    Appends (text, findings) of each pass that notes something to `noted`, the findings
    with lines of that text.

    Returns:
        (the rewritten module; the Keras 2 `Finding`s, with lines of the rewritten module).
    """
    needs = tf1_apis.ImportNeeds(facts.module_aliases)
    # A module of the tree whose functions build graph ops for one that uses EASGD is
    # graph code too, though it may use no graph API itself (an input helper).
    graph_code = facts.builds_graphs or bool(context.graph_helper)
    # Each pass with the names it acts on: one whose names the text lacks changes nothing.
    passes = [(estimator_apis.EstimatorRewriter(needs), estimator_apis.TRIGGERS)]
    if facts.uses_easgd:
        rewriter = session_calls.SessionRewriter(needs, keep=keep_tf_session)
        passes.append((rewriter, session_calls.TRIGGERS))
    passes.append((image_apis.ImageRewriter(needs, graph_code), image_apis.TRIGGERS))
    rewriter = tf1_apis.LegacyApiRewriter(scan, needs, graph_code)
    passes.append((rewriter, rewriter.triggers()))
    for transformer, triggers in passes:
        text = versions.code(module)
        if versions.mentions(module, triggers):
            module = versions.transform(module, transformer)
        noted.append((text, transformer.notes()))
    if versions.mentions(module, _REWRITER_TRIGGERS):
        module = versions.transform(module, _Rewriter(facts, needs))
    module = names.remove_unused_contrib_imports(module, copies=scan.copies)
    module = insert_after_imports(module, facts, needs)
    if facts.uses_easgd:
        text = versions.code(module)
        module, found = creator_scopes.add_creator_scopes(module)
        noted.append((text, found))
    module, findings = legacy_keras.ensure_legacy_keras(
        module, facts.is_script, graph_code, context
    )
    return module, findings


def _findings(source, migrated, facts, noted, keras_findings, context):
    """All the findings of a migration, in line order, with lines of the migrated text."""
    findings = list(keras_findings)
    code = versions.code(migrated)
    for text, found in noted:
        if not found:
            continue  # No line to map.
        to_final = line_mapper(text, code)
        findings += [dataclasses.replace(finding, line=to_final(finding.line)) for finding in found]
    findings += names.leftover_findings(migrated)
    findings += optimizer_defaults.default_findings(migrated)
    if facts.uses_easgd or context.graph_helper:
        findings += global_steps.global_step_findings(migrated)
    library = facts.builds_graphs and not facts.is_script and not facts.picks_mode
    if library and code != source:
        if context.mode_script:
            findings.append(_helper_note(context.mode_script))
        else:
            findings.append(_LIBRARY_NOTE)
    findings.sort(key=lambda finding: finding.line)
    return findings


# A migrated module that builds graphs only in functions that other modules call: its program
# must pick TF1 mode.
_LIBRARY_NOTE = Finding(
    1,
    "builds TF1 graphs only inside functions (no `if __name__ == '__main__':`, no graph "
    "built at its top level), so it looks like a library: call "
    "tf.compat.v1.disable_v2_behavior() once at the start of the program that uses it.",
    unconverted=False,
)


def _helper_note(script):
    """The note of a library module whose graphs a script of the tree builds in TF1 mode."""
    return Finding(
        1,
        f"builds TF1 graphs only inside functions, for {script}, which imports it: that "
        "script calls tf.compat.v1.disable_v2_behavior() (easgd-migrate adds it there), so "
        "this module needs no switch of its own; a program outside the tree that imports it "
        "must call it too.",
        unconverted=False,
    )


# A module that defines contrib's classes itself: a copy of contrib's module.
_COPY_NOTE = (
    "defines ElasticAverageOptimizer or ElasticAverageCustomGetter itself: this looks like a "
    f"local copy of contrib's elastic_average_optimizer.py, which {PACKAGE} replaces. It was "
    "left as it is: delete it once nothing imports it (easgd-migrate points the imports of "
    f"the files it migrates at {PACKAGE}); if it was changed, compare it with {PACKAGE} first."
)


# The names `_Rewriter` acts on: contrib's EASGD names and imports, and `tensorflow.device`.
_REWRITER_TRIGGERS = ("contrib", "device")


class _Rewriter(ImportAwareTransformer):
    """Rewrites EASGD names, contrib imports of them, and `tf.device(function)`."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, facts, needs):
        super().__init__()
        self._facts = facts
        self._needs = needs

    def leave_Attribute(self, original_node, updated_node):
        if self.in_import:
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
        argument = updated_node.args[0].value
        if device_calls.is_device_string(argument, self._facts.string_values, depth=3):
            return updated_node
        return updated_node.with_changes(
            func=device_calls.compat_v1_device(updated_node.func, self._needs)
        )

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
