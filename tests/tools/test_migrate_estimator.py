"""easgd-migrate on the Estimator names TF 2.16+'s tf_upgrade_v2 no longer converts.

TensorFlow 2.15's converter renamed them; 2.16's and later ones pass them through, and the
script then fails on TF 2.15 (`AttributeError: ... has no attribute 'inputs'`). easgd-migrate
converts them, or lists each with its exact replacement, so that a script ends the same
whichever converter ran first: the last test runs the installed TensorFlow's converter and
then easgd-migrate, and expects one text on TF 2.21 (`make test`) and 2.15 (`make test-tf215`).
"""

import inspect
import textwrap

import pytest
import tensorflow as tf
from estimator_support import requires_estimator

from tf_contrib_easgd.migrate import canned_estimators, codemod


def _migrate(source):
    """Migrates dedented `source`; checks that a second run changes nothing."""
    migration = codemod.migrate_source(textwrap.dedent(source))
    assert codemod.migrate_source(migration.code).code == migration.code
    return migration


def _line(source):
    """The migration of `import tensorflow as tf` and the one line `source`: that line."""
    migration = _migrate(f"import tensorflow as tf\n\nx = {source}\n")
    assert migration.code.startswith("import tensorflow as tf\n\nx = ")
    return migration.code.splitlines()[2].removeprefix("x = "), migration.findings


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "tf.estimator.inputs.numpy_input_fn({'x': x}, y, shuffle=True)",
            "tf.compat.v1.estimator.inputs.numpy_input_fn({'x': x}, y, shuffle=True)",
        ),
        (
            "tf.estimator.inputs.pandas_input_fn(frame, frame.pop('y'))",
            "tf.compat.v1.estimator.inputs.pandas_input_fn(frame, frame.pop('y'))",
        ),
        ("tf.estimator.inputs", "tf.compat.v1.estimator.inputs"),
        ("tf.estimator.experimental.KMeans(3)", "tf.compat.v1.estimator.experimental.KMeans(3)"),
        (
            "tf.estimator.experimental.dnn_logit_fn_builder",
            "tf.compat.v1.estimator.experimental.dnn_logit_fn_builder",
        ),
        ("tf.estimator.tpu.RunConfig()", "tf.compat.v1.estimator.tpu.RunConfig()"),
        (
            "tf.estimator.tpu.experimental.EmbeddingConfigSpec",
            "tf.compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec",
        ),
        # TF 2.15's converter wrote the session hooks as tf.estimator.*; TF 2.16+ has no
        # tf.estimator, and tf.compat.v1.train.* is the same class on every version.
        (
            "tf.estimator.StopAtStepHook(last_step=5)",
            "tf.compat.v1.train.StopAtStepHook(last_step=5)",
        ),
        ("tf.estimator.SessionRunHook", "tf.compat.v1.train.SessionRunHook"),
        ("tf.estimator.VocabInfo", "tf.compat.v1.train.VocabInfo"),
        (
            "tf.contrib.estimator.stop_if_no_decrease_hook(e, 'loss', 100)",
            "tf.estimator.experimental.stop_if_no_decrease_hook(e, 'loss', 100)",
        ),
        ("tf.contrib.tpu.TPUEstimator(fn)", "tf.compat.v1.estimator.tpu.TPUEstimator(fn)"),
    ],
)
def test_renames(before, after):
    line, findings = _line(before)
    assert line == after
    assert findings == ()


@pytest.mark.parametrize(
    "source",
    [
        # TF1's API through an alias of tf.compat.v1 has these names.
        "import tensorflow.compat.v1 as tf\n\nfn = tf.estimator.inputs.numpy_input_fn(x)\n",
        # Names TF 2.15 has under tf.estimator, and names of other modules.
        "import tensorflow as tf\n\ne = tf.estimator.Estimator(fn)\n"
        "s = tf.estimator.RunConfig()\nh = my.estimator.StopAtStepHook()\n",
    ],
)
def test_left_alone(source):
    assert codemod.migrate_source(source) == codemod.Migration(code=source, findings=())


def test_a_module_alias_is_spelled_through_tensorflow():
    migration = _migrate(
        """\
        from tensorflow import estimator

        fn = estimator.inputs.numpy_input_fn(x)
        """
    )
    assert migration.code == (
        "from tensorflow import estimator\nimport tensorflow\n\n"
        "fn = tensorflow.compat.v1.estimator.inputs.numpy_input_fn(x)\n"
    )


# --- export_savedmodel -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("maker", "call", "expected"),
    [
        (
            "tf.estimator.Estimator(model_fn)",
            "export_savedmodel(d, fn)",
            "export_saved_model(d, fn)",
        ),
        (
            "tf.compat.v1.estimator.DNNClassifier([8], columns)",
            "export_savedmodel(d, fn, as_text=True)",
            "export_saved_model(d, fn, as_text=True)",
        ),
        # strip_default_attrs=True is what TF 2 always does: it goes.
        (
            "tf.estimator.Estimator(model_fn)",
            "export_savedmodel(d, fn, strip_default_attrs=True)",
            "export_saved_model(d, fn)",
        ),
        (
            "tf.estimator.Estimator(model_fn)",
            "export_savedmodel(d, fn, strip_default_attrs=True, as_text=False)",
            "export_saved_model(d, fn, as_text=False)",
        ),
        (
            "tf.estimator.Estimator(model_fn)",
            "export_savedmodel(d, fn, None, False, None, True)",
            "export_saved_model(d, fn, None, False, None)",
        ),
    ],
)
def test_export_savedmodel_of_an_estimator_is_renamed(maker, call, expected):
    migration = _migrate(f"import tensorflow as tf\n\nmodel = {maker}\nmodel.{call}\n")
    assert migration.code.endswith(f"\nmodel.{expected}\n")
    assert migration.findings == ()


def test_export_savedmodel_on_a_new_estimator_is_renamed():
    line, findings = _line("tf.estimator.Estimator(fn).export_savedmodel(d, serve)")
    assert line == "tf.estimator.Estimator(fn).export_saved_model(d, serve)"
    assert findings == ()


@pytest.mark.parametrize(
    ("source", "line", "why", "replacement"),
    [
        (  # A parameter: its type is not known.
            "def export(model):\n    model.export_savedmodel(d, fn)\n",
            4,
            "If `model` is a tf.estimator.Estimator (not provable here), write",
            "model.export_saved_model(d, fn)",
        ),
        (  # Bound to something else on one path.
            "model = tf.estimator.Estimator(f) if a else load()\nmodel.export_savedmodel(d, fn)\n",
            4,
            "If `model` is a tf.estimator.Estimator (not provable here), write",
            "model.export_saved_model(d, fn)",
        ),
        (
            "self.estimator.export_savedmodel(d, fn, as_text=True)\n",
            3,
            "If `self.estimator` is a tf.estimator.Estimator (not provable here), write",
            "self.estimator.export_saved_model(d, fn, as_text=True)",
        ),
        (  # An Estimator, but TF 2 would strip what this keeps.
            "e = tf.estimator.Estimator(f)\n"
            "e.export_savedmodel(d, fn, strip_default_attrs=False)\n",
            4,
            "(strip_default_attrs is gone): unless the SavedModel must keep them, write",
            "e.export_saved_model(d, fn)",
        ),
    ],
)
def test_export_savedmodel_of_unknown_objects_is_listed_with_the_replacement(
    source, line, why, replacement
):
    full = f"import tensorflow as tf\n\n{source}"
    migration = _migrate(full)
    assert migration.code == full
    [finding] = migration.findings
    assert (finding.line, finding.unconverted) == (line, True)
    assert "has no export_savedmodel" in finding.message
    assert f"{why} `{replacement}`;" in finding.message


# --- Canned Estimators -------------------------------------------------------------------------

SUM_V2 = "tf.keras.losses.Reduction.SUM"
SUM_V1 = "tf.compat.v1.losses.Reduction.SUM"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # A TF1 optimizer: TF1's class, its reduction (TF 2's refuses tf.compat.v1.train's).
        (
            "tf.estimator.DNNClassifier([8], fc, "
            "optimizer=tf.compat.v1.train.AdagradOptimizer(0.1))",
            "tf.compat.v1.estimator.DNNClassifier(hidden_units=[8], feature_columns=fc, "
            f"optimizer=tf.compat.v1.train.AdagradOptimizer(0.1), loss_reduction={SUM_V1})",
        ),
        # No optimizer: TF 2's class, with TF1's sum over the batch.
        (
            "tf.estimator.LinearRegressor(fc)",
            f"tf.estimator.LinearRegressor(feature_columns=fc, loss_reduction={SUM_V2})",
        ),
        (
            "tf.estimator.DNNRegressor([8], fc, loss_reduction=r)",
            "tf.estimator.DNNRegressor(hidden_units=[8], feature_columns=fc, loss_reduction=r)",
        ),
        # A positional optimizer is found once the arguments have their names.
        (
            "tf.estimator.LinearClassifier(fc, None, 2, None, None, 'Ftrl')",
            "tf.compat.v1.estimator.LinearClassifier(feature_columns=fc, model_dir=None, "
            "n_classes=2, weight_column=None, label_vocabulary=None, optimizer='Ftrl', "
            f"loss_reduction={SUM_V1})",
        ),
        (
            "tf.estimator.LinearRegressor(fc, partitioner=p)",
            "tf.compat.v1.estimator.LinearRegressor(feature_columns=fc, partitioner=p, "
            f"loss_reduction={SUM_V1})",
        ),
        (
            "tf.estimator.DNNLinearCombinedClassifier(dnn_optimizer=o)",
            f"tf.compat.v1.estimator.DNNLinearCombinedClassifier(dnn_optimizer=o, "
            f"loss_reduction={SUM_V1})",
        ),
        # The heads' Estimators: moved, nothing added.
        (
            "tf.estimator.DNNEstimator(head, [8], fc, input_layer_partitioner=p)",
            "tf.compat.v1.estimator.DNNEstimator(head, [8], fc, input_layer_partitioner=p)",
        ),
        ("tf.estimator.DNNEstimator(head, [8], fc)", "tf.estimator.DNNEstimator(head, [8], fc)"),
        # A Keras optimizer: TF 2's class takes it, TF1's would not.
        (
            "tf.estimator.DNNClassifier([8], fc, optimizer=tf.keras.optimizers.Adam())",
            "tf.estimator.DNNClassifier(hidden_units=[8], feature_columns=fc, "
            f"optimizer=tf.keras.optimizers.Adam(), loss_reduction={SUM_V2})",
        ),
        # What TF 2.15's converter wrote for TF1's class, which refuses Keras's reduction.
        (
            f"tf.compat.v1.estimator.DNNClassifier(optimizer=o, loss_reduction={SUM_V2})",
            f"tf.compat.v1.estimator.DNNClassifier(optimizer=o, loss_reduction={SUM_V1})",
        ),
        ("tf.estimator.DNNClassifier(*args)", "tf.estimator.DNNClassifier(*args)"),
    ],
)
def test_canned_estimators(before, after):
    line, findings = _line(before)
    assert line == after
    assert findings == ()


def test_a_class_imported_by_name_is_spelled_through_tensorflow_only_when_changed():
    unchanged = (
        "from tensorflow.estimator import DNNRegressor\n\n"
        "m = DNNRegressor(hidden_units=[8], feature_columns=f, loss_reduction=r)\n"
    )
    assert codemod.migrate_source(unchanged) == codemod.Migration(code=unchanged, findings=())
    migration = _migrate(
        "from tensorflow.estimator import DNNRegressor\n\nm = DNNRegressor([8], f, optimizer=o)\n"
    )
    assert migration.code == (
        "from tensorflow.estimator import DNNRegressor\nimport tensorflow\n\n"
        "m = tensorflow.compat.v1.estimator.DNNRegressor(hidden_units=[8], feature_columns=f, "
        "optimizer=o, loss_reduction=tensorflow.compat.v1.losses.Reduction.SUM)\n"
    )


def test_an_added_argument_follows_the_calls_layout():
    migration = _migrate(
        """\
        import tensorflow as tf

        model = tf.estimator.LinearClassifier(
            feature_columns=columns,
            n_classes=3,
        )
        """
    )
    assert migration.code.endswith(
        "    n_classes=3,\n    loss_reduction=tf.keras.losses.Reduction.SUM,\n)\n"
    )


@requires_estimator
@pytest.mark.parametrize("name", sorted(canned_estimators.TF1_ARGUMENTS))
def test_the_argument_tables_are_tensorflows_signatures(name):
    def arguments(cls):
        return list(inspect.signature(cls.__init__).parameters)[1:]

    tf1, tf2 = (
        arguments(getattr(tf.compat.v1.estimator, name)),
        arguments(getattr(tf.estimator, name)),
    )
    assert list(canned_estimators._ARGUMENTS.get(name, tf1)) == tf1
    # What moves a call to TF1's class: the arguments TF 2's lacks, and the optimizers.
    moving = {a for a in tf1 if a not in tf2} | {a for a in tf1 if a.endswith("optimizer")}
    assert set(canned_estimators.TF1_ARGUMENTS[name]) == moving


# --- The same end, whichever converter ran first ----------------------------------------------

ESTIMATOR_SCRIPT = """\
import numpy as np
import tensorflow as tf

FEATURES = [tf.feature_column.numeric_column("x", shape=[4])]


def serving_input_fn():
    x = tf.placeholder(tf.float32, [None, 4])
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def main(_):
    x = np.zeros((8, 4), np.float32)
    train_fn = tf.estimator.inputs.numpy_input_fn({"x": x}, np.zeros(8), shuffle=True)
    model = tf.estimator.DNNClassifier([8], FEATURES, optimizer=tf.train.AdagradOptimizer(0.1))
    plain = tf.estimator.LinearClassifier(FEATURES)
    model.train(train_fn, hooks=[tf.train.StopAtStepHook(last_step=1)])
    model.export_savedmodel("/tmp/export", serving_input_fn)
    plain.train(train_fn, steps=1)


if __name__ == "__main__":
    tf.app.run()
"""
CONVERTED = """\
import numpy as np
import tensorflow as tf

FEATURES = [tf.feature_column.numeric_column("x", shape=[4])]


def serving_input_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4])
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def main(_):
    x = np.zeros((8, 4), np.float32)
    train_fn = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, np.zeros(8), shuffle=True)
    model = tf.compat.v1.estimator.DNNClassifier(DNN_ARGUMENTS)
    plain = tf.estimator.LinearClassifier(feature_columns=FEATURES, KERAS_SUM)
    model.train(train_fn, hooks=[tf.compat.v1.train.StopAtStepHook(last_step=1)])
    model.export_saved_model("/tmp/export", serving_input_fn)
    plain.train(train_fn, steps=1)


if __name__ == "__main__":
    tf.compat.v1.app.run()
""".replace(
    "DNN_ARGUMENTS",
    "hidden_units=[8], feature_columns=FEATURES, "
    f"optimizer=tf.compat.v1.train.AdagradOptimizer(0.1), loss_reduction={SUM_V1}",
).replace("KERAS_SUM", f"loss_reduction={SUM_V2}")


def test_either_tensorflows_converter_then_ours_gives_one_script(tmp_path):
    from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2  # noqa: PLC0415

    before, after = tmp_path / "before.py", tmp_path / "after.py"
    before.write_text(ESTIMATOR_SCRIPT)
    ast_edits.ASTCodeUpgrader(tf_upgrade_v2.TFAPIChangeSpec()).process_file(str(before), str(after))
    migration = codemod.migrate_source(after.read_text())
    print(f"TensorFlow {tf.__version__}'s converter, then easgd-migrate:\n{migration.code}")
    assert migration.code == CONVERTED.replace(
        "\nimport tensorflow as tf\n",
        "\nimport tensorflow as tf\n\ntf.compat.v1.disable_v2_behavior()\n",
    )
    assert migration.findings == ()
