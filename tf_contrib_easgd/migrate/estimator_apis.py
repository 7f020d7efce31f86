# ruff: noqa: N802 -- libcst dispatches on the node class names: leave_Attribute, leave_Call, ...
"""The Estimator renames of TF 2.15's `tf_upgrade_v2` that 2.16's and later ones dropped.

A helper of `tf_contrib_easgd.migrate.codemod`, run on every module, so that a script ends
the same whichever TensorFlow's converter ran first: `tf.estimator.inputs.numpy_input_fn`
and the other names TF 2 moved to `tf.compat.v1.estimator`, contrib's Estimator hooks and
TPU names, the session hooks TF 2.15's converter spelled `tf.estimator.*` (the same classes
as `tf.compat.v1.train.*`, which later TensorFlow keeps), `export_savedmodel` (renamed where
the object is provably an Estimator, listed with its replacement otherwise) and the canned
Estimators' arguments (`canned_estimators`). docs/DESIGN.md, "The migration tool".
"""

import libcst as cst
from libcst.metadata import (
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from tf_contrib_easgd.migrate import canned_estimators
from tf_contrib_easgd.migrate.contrib_names import Finding
from tf_contrib_easgd.migrate.import_aware import ImportAwareTransformer

_HOOKS = (
    *("CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook"),
    *("GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError"),
    *("NanTensorHook", "ProfilerHook", "SecondOrStepTimer", "SessionRunArgs"),
    *("SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook"),
    *("StopAtStepHook", "SummarySaverHook", "VocabInfo"),
)
_EARLY_STOPPING = (
    *("make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook"),
    *("stop_if_no_decrease_hook", "stop_if_no_increase_hook"),
)
_TPU = ("InputPipelineConfig", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec")
# Qualified name (an alias of `tensorflow.compat.v1` is TF1's API, left alone) -> its name
# under `tensorflow` on TF 2.15. A module's name covers everything under it.
RENAMES = {
    "tensorflow.estimator.inputs": "compat.v1.estimator.inputs",
    "tensorflow.estimator.tpu": "compat.v1.estimator.tpu",
    **{
        f"tensorflow.estimator.experimental.{name}": f"compat.v1.estimator.experimental.{name}"
        for name in ("KMeans", "dnn_logit_fn_builder", "linear_logit_fn_builder")
    },
    **{f"tensorflow.estimator.{name}": f"compat.v1.train.{name}" for name in _HOOKS},
    **{
        f"tensorflow.contrib.estimator.{name}": f"estimator.experimental.{name}"
        for name in _EARLY_STOPPING
    },
    **{f"tensorflow.contrib.tpu.{name}": f"compat.v1.estimator.tpu.{name}" for name in _TPU},
}
# What a module's text must contain for the rewriter to change it: the names above and the
# canned Estimators lie under `estimator` or contrib's `tpu`.
TRIGGERS = ("estimator", "tpu", "export_savedmodel")
_ESTIMATOR_MODULES = ("tensorflow.estimator.", "tensorflow.compat.v1.estimator.")
_ESTIMATORS = frozenset(
    {
        *("Estimator", "BoostedTreesClassifier", "BoostedTreesRegressor", "tpu.TPUEstimator"),
        *canned_estimators.TF1_ARGUMENTS,
    }
)
_MAKES_ESTIMATOR = frozenset(
    {"tensorflow.keras.estimator.model_to_estimator"}
    | {module + name for module in _ESTIMATOR_MODULES for name in _ESTIMATORS}
)

EXPORT_NOTE = (
    "`{call}(...)` was not converted: TF 2's tf.estimator.Estimator has no export_savedmodel "
    "(TensorFlow 2.15's tf_upgrade_v2 flagged it; later ones say nothing). {why}write "
    "`{replacement}`; a tf.compat.v1.estimator.Estimator has both methods."
)


class EstimatorRewriter(ImportAwareTransformer):
    """Renames the Estimator APIs TF 2.15's converter renamed; notes what it cannot.

    Attributes:
        findings: `Finding`s, with lines of the text visited.
    """

    METADATA_DEPENDENCIES = (
        QualifiedNameProvider,
        PositionProvider,
        ScopeProvider,
        ParentNodeProvider,
    )

    def __init__(self, needs):
        """Initializes the rewriter.

        Args:
            needs: the `tf1_apis.ImportNeeds` shared with the other rewrites.
        """
        super().__init__()
        self._needs = needs
        self.findings = []

    def notes(self):
        """The findings of the pass, after it ran."""
        return list(self.findings)

    def _names(self, node):
        """The qualified names of a node of the tree visited, `tensorflow.compat.v1` kept."""
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def _tensorflow(self, node):
        """`node`'s own spelling of `tensorflow` (the base of its chain), else the module's."""
        while isinstance(node, cst.Attribute):
            node = node.value
        if "tensorflow" in self._names(node):
            return node
        return cst.Name(self._needs.tensorflow_name())

    def _spelled(self, base, path):
        expression = base
        for attr in path.split("."):
            expression = cst.Attribute(value=expression, attr=cst.Name(attr))
        return expression

    def leave_Attribute(self, original_node, updated_node):
        if self.in_import:
            return updated_node
        for name in sorted(self._names(original_node)):
            if name in RENAMES:
                return self._spelled(self._tensorflow(original_node), RENAMES[name])
        return updated_node

    def leave_Call(self, original_node, updated_node):
        func = original_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "export_savedmodel":
            return self._export(original_node, updated_node)
        for name in self._names(func):
            module = next((m for m in _ESTIMATOR_MODULES if name.startswith(m)), None)
            short = name.removeprefix(module or "")
            if module and short in canned_estimators.TF1_ARGUMENTS:
                tf1 = module != _ESTIMATOR_MODULES[0]

                def spell(path, func=func):
                    return self._spelled(self._tensorflow(func), path)

                call, now_tf1 = canned_estimators.rewrite_call(
                    original_node, updated_node, short, tf1, spell, self._names
                )
                if now_tf1 and not tf1:
                    call = call.with_changes(func=spell(f"compat.v1.estimator.{short}"))
                return call
        return updated_node

    def _export(self, original_node, updated_node):
        """`X.export_savedmodel(...)` -> `X.export_saved_model(...)` where X is an Estimator
        and no `strip_default_attrs=False` is passed (TF 2 always strips); noted otherwise."""
        receiver = original_node.func.value
        args = list(updated_node.args)
        strip = [i for i, arg in enumerate(args) if _is_strip_argument(arg, i)]
        kept = [arg for i, arg in enumerate(args) if i not in strip]
        if kept and strip and strip[-1] == len(args) - 1:
            kept[-1] = kept[-1].with_changes(comma=args[-1].comma)
        func = updated_node.func.with_changes(attr=cst.Name("export_saved_model"))
        renamed = updated_node.with_changes(func=func, args=kept)
        strips = all(_is_true(args[i].value) for i in strip)
        if strips and self._is_estimator(receiver):
            return renamed
        if strips:
            why = f"If `{_code(receiver)}` is a tf.estimator.Estimator (not provable here), "
        else:
            why = (
                "TF 2's export_saved_model always strips default attributes "
                "(strip_default_attrs is gone): unless the SavedModel must keep them, "
            )
        message = EXPORT_NOTE.format(
            call=_code(original_node.func), why=why, replacement=_code(renamed)
        )
        line = self.get_metadata(PositionProvider, original_node).start.line
        self.findings.append(Finding(line, message))
        return updated_node

    def _is_estimator(self, receiver):
        """Whether `receiver` is provably an Estimator: made here by an Estimator class, or a
        name whose every assignment in reach is one."""
        if isinstance(receiver, cst.Call):
            return bool(self._names(receiver.func) & _MAKES_ESTIMATOR)
        if not isinstance(receiver, cst.Name):
            return False
        scope = self.get_metadata(ScopeProvider, receiver, None)
        assignments = list(scope[receiver.value]) if scope is not None else []
        values = []
        for assignment in assignments:
            target = getattr(assignment, "node", None)
            parent = self.get_metadata(ParentNodeProvider, target, None) if target else None
            if not isinstance(parent, cst.AssignTarget):
                return False  # A parameter, a loop variable, an import, ...
            values.append(self.get_metadata(ParentNodeProvider, parent).value)
        return bool(values) and all(
            isinstance(v, cst.Call) and self._names(v.func) & _MAKES_ESTIMATOR for v in values
        )


def _code(node):
    return cst.Module([]).code_for_node(node)


def _is_strip_argument(arg, index):
    """Whether `arg`, the `index`-th argument of export_savedmodel, is strip_default_attrs."""
    if arg.keyword is not None:
        return arg.keyword.value == "strip_default_attrs"
    return not arg.star and index == 5  # (export_dir_base, serving_input_receiver_fn,
    # assets_extra, as_text, checkpoint_path, strip_default_attrs)


def _is_true(node):
    return isinstance(node, cst.Name) and node.value == "True"
