"""TF1's canned Estimators on TensorFlow 2.15: the call rewrite TF 2.15's converter made.

A helper of `tf_contrib_easgd.migrate.estimator_apis`. TF 2's canned Estimators
(`tf.estimator.DNNClassifier`, ...) take Keras optimizers only, no `input_layer_partitioner`,
and average the loss over the batch where TF1's summed it. TF 2.15's `tf_upgrade_v2` (not
2.16's and later) therefore wrote positional arguments as keywords, moved a call that passes
an optimizer or a partitioner to `tf.compat.v1.estimator.*` (TF1's class), and gave the
classifiers and regressors TF1's `loss_reduction` when they had none. `rewrite_call` does the
same, with two fixes: for TF1's class the reduction is `tf.compat.v1.losses.Reduction.SUM`
(TF 2.15's converter wrote Keras's, which TF1's class refuses: `ValueError: Invalid
loss_reduction: sum`; mended in calls it already wrote too), and a linear Estimator's
`partitioner` (which TF 2's lacks) moves it to TF1's class as an optimizer does.
"""

import libcst as cst

# TF1's arguments of the classifiers and regressors, in order (their TF1 signatures).
_ARGUMENTS = {
    "BaselineClassifier": (
        *("model_dir", "n_classes", "weight_column", "label_vocabulary", "optimizer"),
        *("config", "loss_reduction"),
    ),
    "BaselineRegressor": (
        *("model_dir", "label_dimension", "weight_column", "optimizer", "config"),
        "loss_reduction",
    ),
    "DNNClassifier": (
        *("hidden_units", "feature_columns", "model_dir", "n_classes", "weight_column"),
        *("label_vocabulary", "optimizer", "activation_fn", "dropout"),
        *("input_layer_partitioner", "config", "warm_start_from", "loss_reduction"),
        "batch_norm",
    ),
    "DNNRegressor": (
        *("hidden_units", "feature_columns", "model_dir", "label_dimension", "weight_column"),
        *("optimizer", "activation_fn", "dropout", "input_layer_partitioner", "config"),
        *("warm_start_from", "loss_reduction", "batch_norm"),
    ),
    "LinearClassifier": (
        *("feature_columns", "model_dir", "n_classes", "weight_column", "label_vocabulary"),
        *("optimizer", "config", "partitioner", "warm_start_from", "loss_reduction"),
        "sparse_combiner",
    ),
    "LinearRegressor": (
        *("feature_columns", "model_dir", "label_dimension", "weight_column", "optimizer"),
        *("config", "partitioner", "warm_start_from", "loss_reduction", "sparse_combiner"),
    ),
    "DNNLinearCombinedClassifier": (
        *("model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns"),
        *("dnn_optimizer", "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout"),
        *("n_classes", "weight_column", "label_vocabulary", "input_layer_partitioner"),
        *("config", "warm_start_from", "loss_reduction", "batch_norm"),
        "linear_sparse_combiner",
    ),
    "DNNLinearCombinedRegressor": (
        *("model_dir", "linear_feature_columns", "linear_optimizer", "dnn_feature_columns"),
        *("dnn_optimizer", "dnn_hidden_units", "dnn_activation_fn", "dnn_dropout"),
        *("label_dimension", "weight_column", "input_layer_partitioner", "config"),
        *("warm_start_from", "loss_reduction", "batch_norm", "linear_sparse_combiner"),
    ),
}
_DNN = ("input_layer_partitioner", "optimizer")
_LINEAR = ("partitioner", "optimizer")
_COMBINED = ("input_layer_partitioner", "dnn_optimizer", "linear_optimizer")
# Class -> the arguments that TF 2's class takes differently (optimizers: Keras ones only) or
# not at all: passing any of them moves the call to TF1's class. (TF 2.15's converter looked
# for `input_layer_partitioner` in the linear ones too, which have `partitioner` instead.)
TF1_ARGUMENTS = {
    "BaselineEstimator": ("optimizer",),
    "BaselineClassifier": ("optimizer",),
    "BaselineRegressor": ("optimizer",),
    "DNNEstimator": _DNN,
    "DNNClassifier": _DNN,
    "DNNRegressor": _DNN,
    "LinearEstimator": _LINEAR,
    "LinearClassifier": _LINEAR,
    "LinearRegressor": _LINEAR,
    "DNNLinearCombinedEstimator": _COMBINED,
    "DNNLinearCombinedClassifier": _COMBINED,
    "DNNLinearCombinedRegressor": _COMBINED,
}
_KERAS_OPTIMIZERS = ("tensorflow.keras.optimizers.", "keras.optimizers.", "tf_keras.optimizers.")
_KERAS_REDUCTION = "tensorflow.keras.losses.Reduction."
_REDUCTIONS = ("SUM", "SUM_OVER_BATCH_SIZE")  # Keras's members that TF1's losses also has.


def rewrite_call(original, call, name, tf1, spell, qualified_names):
    """Rewrites a call of a canned Estimator class as TF 2.15's converter did.

    Args:
        original: the call as it was (`qualified_names` knows its nodes).
        call: the call as the rewrite has it so far.
        name: the class's name (`DNNClassifier`, ...), a key of `TF1_ARGUMENTS`.
        tf1: whether the call already names TF1's class (`tf.compat.v1.estimator.*`).
        spell: a dotted path under `tensorflow` -> the expression naming it in the module
            (called only for a name the rewrite writes).
        qualified_names: node of the original tree -> its qualified names.

    Returns:
        (the new call, whether it now names TF1's class).
    """
    if tf1:
        return _mend_keras_reduction(original, call, spell, qualified_names), True
    if any(arg.star for arg in call.args):
        return call, False  # Which argument is which is not known.
    arguments = _ARGUMENTS.get(name, ())
    call = _as_keywords(call, arguments)
    named = _as_keywords(original, arguments).args
    passed = {arg.keyword.value: arg.value for arg in named if arg.keyword is not None}
    moves = [
        argument
        for argument in TF1_ARGUMENTS[name]
        if argument in passed and not _is_keras_optimizer(passed[argument], qualified_names)
    ]
    if name in _ARGUMENTS and "loss_reduction" not in passed:
        losses = "compat.v1.losses" if moves else "keras.losses"
        call = _with_keyword(call, "loss_reduction", spell(f"{losses}.Reduction.SUM"))
    return call, bool(moves)


def _as_keywords(call, arguments):
    """`call` with its positional arguments written as the keywords `arguments` name."""
    args = [
        arg.with_changes(keyword=cst.Name(arguments[index]), equal=_equal())
        if arg.keyword is None and index < len(arguments)
        else arg
        for index, arg in enumerate(call.args)
    ]
    return call.with_changes(args=args)


def _equal():
    no_space = cst.SimpleWhitespace("")
    return cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space)


def _with_keyword(call, keyword, value):
    """`call` with `keyword=value` added last, its commas laid out like the others'."""
    new = cst.Arg(value=value, keyword=cst.Name(keyword), equal=_equal())
    if not call.args:
        return call.with_changes(args=[new])
    *first, last = call.args
    if isinstance(last.comma, cst.Comma):  # A trailing comma: one line per argument.
        space = call.whitespace_before_args
        if not isinstance(space, cst.ParenthesizedWhitespace):
            space = cst.SimpleWhitespace(" ")
        separator = cst.Comma(whitespace_after=space)
        return call.with_changes(
            args=[*first, last.with_changes(comma=separator), new.with_changes(comma=last.comma)]
        )
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return call.with_changes(args=[*first, last.with_changes(comma=separator), new])


def _is_keras_optimizer(value, qualified_names):
    """Whether `value` is provably a Keras optimizer (or a call making one)."""
    node = value.func if isinstance(value, cst.Call) else value
    return any(name.startswith(_KERAS_OPTIMIZERS) for name in qualified_names(node))


def _mend_keras_reduction(original, call, spell, qualified_names):
    """TF1's class given `loss_reduction=tf.keras.losses.Reduction.X`, which it refuses:
    the same reduction of `tf.compat.v1.losses`."""
    args = list(call.args)
    for index, (before, arg) in enumerate(zip(original.args, call.args, strict=True)):
        if arg.keyword is None or arg.keyword.value != "loss_reduction":
            continue
        for qualified in qualified_names(before.value):
            member = qualified.removeprefix(_KERAS_REDUCTION)
            if qualified.startswith(_KERAS_REDUCTION) and member in _REDUCTIONS:
                value = spell(f"compat.v1.losses.Reduction.{member}")
                args[index] = arg.with_changes(value=value)
    return call.with_changes(args=args)
