# ruff: noqa: N802 -- libcst dispatches on the node class names: leave_Attribute, visit_Name, ...
"""TensorFlow's training sessions in a module that uses EASGD: this package's by default.

A helper of `tf_contrib_easgd.migrate.codemod`. TensorFlow's `MonitoredTrainingSession`
(any spelling or alias) becomes `tf_contrib_easgd.MonitoredTrainingSession`, which takes the
same arguments, and each one is noted with the reason; `keep` leaves TensorFlow's. Every use
of `tf.compat.v1.train.Supervisor`, and of tf-slim's `slim.learning.train` (a Supervisor
inside), is noted with what it does to the centre and what to pass or use instead.
docs/DESIGN.md, "The migration tool", says why.
"""

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, Finding
from tf_contrib_easgd.migrate.import_aware import ImportAwareTransformer

_MTS = "MonitoredTrainingSession"
# Qualified names (with `tensorflow.compat.v1.` read as `tensorflow.`) and the modules that
# export them, for `from <module> import MonitoredTrainingSession`.
_MTS_MODULES = frozenset({"tensorflow.train", "tensorflow.python.training.monitored_session"})
_MTS_NAMES = frozenset(f"{module}.{_MTS}" for module in _MTS_MODULES)
_SUPERVISOR_NAMES = frozenset(
    {"tensorflow.train.Supervisor", "tensorflow.python.training.supervisor.Supervisor"}
)
# tf-slim's (and contrib.slim's) trainer: a Supervisor inside.
_SLIM_TRAIN_NAMES = frozenset({"tf_slim.learning.train", "tensorflow.contrib.slim.learning.train"})

# What a module's text must contain for the rewriter to change or note anything.
TRIGGERS = (_MTS, "Supervisor", "learning")

MOVED_NOTE = (
    "`{spelled}` became {package}.{mts} (same arguments). TensorFlow's makes the chief "
    "restore its latest checkpoint over the centre each time it creates a session: at a "
    "restart, and at every session rebuild after an AbortedError or UnavailableError, each "
    "time throwing away what all workers added since that checkpoint. {package}'s keeps a "
    "centre the parameter servers hold (it restores only a centre they lost), and a "
    "non-chief starts as soon as the centre is ready instead of up to 30 s later. "
    "easgd-migrate --keep_tf_session keeps TensorFlow's."
).format(spelled="{spelled}", package=PACKAGE, mts=_MTS)
SUPERVISOR_NOTE = (
    "`{spelled}`: a chief's Supervisor restores the latest checkpoint of its logdir over the "
    "centre whenever it creates a session (a restarted chief sets every worker's progress "
    "since back), or runs init_op, re-initialising the centre, when there is none; it runs "
    "no session hooks, so the EASGD hook does not start the worker from the centre. Use "
    "{package}.{mts}(master=server.target, is_chief=IS_CHIEF, checkpoint_dir=LOGDIR, "
    "hooks=[opt.make_session_run_hook(IS_CHIEF, TASK_INDEX)]) instead of "
    "sv.managed_session() or sv.prepare_or_wait_for_session(), and sess.should_stop() for "
    "sv.should_stop(): it keeps a centre the parameter servers hold, runs the hook, and "
    "starts the queue runners and saves checkpoints as the Supervisor did."
).format(spelled="{spelled}", package=PACKAGE, mts=_MTS)

SLIM_TRAIN_NOTE = (
    "`{spelled}` trains under a tf.train.Supervisor, which runs no session hooks: the "
    "EASGD hook never runs, so workers do not start from the centre, and a chief restores "
    "its logdir's latest checkpoint over the centre at every start. Build "
    "`with tf.control_dependencies([tf.compat.v1.local_variables_initializer()]): "
    "local_init_op = opt.get_init_op(TASK_INDEX)` and pass local_init_op=local_init_op, so "
    "that each worker starts from the centre, and "
    "saver=opt.swapping_saver() so that its checkpoints hold the centre under the model's "
    "names; or train in {package}.{mts}(master=..., is_chief=..., checkpoint_dir=LOGDIR, "
    "hooks=[opt.make_session_run_hook(IS_CHIEF, TASK_INDEX)]), which keeps a centre the "
    "parameter servers hold."
).format(spelled="{spelled}", package=PACKAGE, mts=_MTS)


class SessionRewriter(ImportAwareTransformer):
    """Moves `MonitoredTrainingSession` to this package's and notes each `Supervisor`.

    Run it on modules that use EASGD only.

    Attributes:
        findings: `Finding`s (notes), with lines of the text visited.
    """

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self, needs, keep):
        """Initializes the rewriter.

        Args:
            needs: the `tf1_apis.ImportNeeds` shared with the other rewrites.
            keep: keep TensorFlow's `MonitoredTrainingSession` (no rewrite, no note).
        """
        super().__init__()
        self._needs = needs
        self._keep = keep
        self.findings = []

    def notes(self):
        """The findings of the pass, after it ran."""
        return list(self.findings)

    def _note(self, node, text, spelled):
        line = self.get_metadata(PositionProvider, node).start.line
        self.findings.append(Finding(line, text.format(spelled=spelled), unconverted=False))

    def _spelled(self, node):
        return cst.Module([]).code_for_node(node)

    def visit_Name(self, node):
        if not self.in_import and names.qualified_names(self, node) & _SUPERVISOR_NAMES:
            self._note(node, SUPERVISOR_NOTE, node.value)

    def leave_Attribute(self, original_node, updated_node):
        if self.in_import:
            return updated_node
        found = names.qualified_names(self, original_node)
        if found & _SUPERVISOR_NAMES:
            self._note(original_node, SUPERVISOR_NOTE, self._spelled(original_node))
        if found & _SLIM_TRAIN_NAMES:
            self._note(original_node, SLIM_TRAIN_NOTE, self._spelled(original_node))
        if not found & _MTS_NAMES or self._keep:
            return updated_node
        self._note(original_node, MOVED_NOTE, self._spelled(original_node))
        return cst.Attribute(value=cst.Name(self._needs.package_name()), attr=cst.Name(_MTS))

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if self._keep:
            return updated_node
        return names.split_line(updated_node, lambda node: self._split(node, original_node))

    def _split(self, node, line):
        """Splits `from tensorflow[.compat.v1].train import MonitoredTrainingSession, ...`,
        noting it on `line`."""
        if not isinstance(node, cst.ImportFrom) or isinstance(node.names, cst.ImportStar):
            return node, None
        module = names.import_module_name(node) or ""
        if names.normalize(module) not in _MTS_MODULES:
            return node, None
        stays, ours = names.split_import(node, {_MTS: _MTS})
        if ours is not None:
            self._note(line, MOVED_NOTE, f"from {module} import {_MTS}")
        return stays, ours
