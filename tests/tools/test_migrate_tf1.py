"""easgd-migrate on TF1 idioms beyond contrib: tf.Variable global steps, tf.layers (and the
Keras 2 switch), TF1 summaries, local copies of contrib's module, Python 2 sources, empty
files, atomic writes, and the hand edits listed for other tf.contrib uses.

Each rewrite is checked on its exact text and for idempotence; two cases run a migrated script
in a fresh process (TensorFlow 2.21 and, in the 2.15 suite, 2.15).
"""

import importlib.util
import io
import re
import textwrap

import pytest
from processes import run_python_script

from tf_contrib_easgd.migrate import cli as migrate
from tf_contrib_easgd.migrate import codemod, hand_edits

# tf.compat.v1.layers needs Keras 2 on TensorFlow 2.16 and later: the `legacy-keras` extra.
HAS_TF_KERAS = importlib.util.find_spec("tf_keras") is not None


def _expect(source, expected, findings=None):
    """Asserts the exact migration of dedented `source` and that a second run changes nothing.

    Args:
        source: the module before.
        expected: the module after (dedented too).
        findings: when given, the (line, unconverted) of each finding, in order.

    Returns:
        The findings.
    """
    migration = codemod.migrate_source(textwrap.dedent(source))
    assert migration.code == textwrap.dedent(expected)
    again = codemod.migrate_source(migration.code)
    assert again.code == migration.code
    if findings is not None:
        assert [(f.line, f.unconverted) for f in migration.findings] == findings
    return migration.findings


def _run(*paths, **kwargs):
    """Runs `migrate.run` and returns (status, stdout text, stderr text)."""
    out, err = io.StringIO(), io.StringIO()
    status = migrate.run([str(p) for p in paths], out=out, err=err, **kwargs)
    return status, out.getvalue(), err.getvalue()


# --- tf.Variable -> tf.compat.v1.Variable in graph-building modules ---------------------------

GRAPH_SCRIPT = """\
{imports}

tf.compat.v1.disable_v2_behavior()


def main():
    x = tf.compat.v1.placeholder(tf.float32)
    global_step = {variable}(0, name="global_step", trainable=False)


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    ("imports", "variable", "migrated"),
    [
        ("import tensorflow as tf", "tf.Variable", "tf.compat.v1.Variable"),
        (
            "import tensorflow as tf\nimport tensorflow as tf_lib",
            "tf_lib.Variable",
            "tf_lib.compat.v1.Variable",
        ),
        (
            "import tensorflow as tf\nfrom tensorflow import Variable",
            "Variable",
            "tf.compat.v1.Variable",
        ),
        (
            # TensorFlow's own contrib tests spelled it through the internal module.
            "import tensorflow as tf\nfrom tensorflow.python.ops import variables",
            "variables.Variable",
            "tf.compat.v1.Variable",
        ),
        (
            "import tensorflow as tf\nfrom tensorflow.python.ops import variables",
            "variables.VariableV1",
            "tf.compat.v1.Variable",
        ),
        ("import tensorflow as tf", "tf.compat.v1.Variable", "tf.compat.v1.Variable"),
    ],
)
def test_variable_in_a_graph_module_becomes_compat_v1(imports, variable, migrated):
    source = GRAPH_SCRIPT.format(imports=imports, variable=variable)
    expected = GRAPH_SCRIPT.format(imports=imports, variable=migrated)
    _expect(source, expected, findings=[])


def test_internal_variables_module_without_a_tensorflow_import():
    _expect(
        """\
        from tensorflow.python.ops import variables
        from tensorflow.contrib.opt.python.training.elastic_average_optimizer import (
            ElasticAverageOptimizer)

        global_step = variables.Variable(0, name='global_step', trainable=False)
        isinstance(global_step, variables.Variable)
        opt = ElasticAverageOptimizer(sgd, 2, getter)

        if __name__ == "__main__":
            pass
        """,
        """\
        from tensorflow.python.ops import variables
        from tf_contrib_easgd import (
            ElasticAverageOptimizer)
        import tensorflow

        tensorflow.compat.v1.disable_v2_behavior()

        global_step = tensorflow.compat.v1.Variable(0, name='global_step', trainable=False)
        isinstance(global_step, variables.Variable)
        opt = ElasticAverageOptimizer(sgd, 2, getter)

        if __name__ == "__main__":
            pass
        """,
        findings=[(10, False)],  # The optimizer keeps contrib's defaults: their cost.
    )


@pytest.mark.parametrize(
    "source",
    [
        # Not a graph module: TF 2 code keeps TF 2 variables.
        "import tensorflow as tf\n\nv = tf.Variable(1.0)\nprint(v + 1)\n",
        # Only calls change: a type check keeps tf.Variable, which both kinds pass.
        "import tensorflow as tf\n\n\ndef build():\n    x = tf.compat.v1.placeholder(tf.float32)\n"
        "    return isinstance(x, tf.Variable)\n",
        # Already TF1's Variable through a compat.v1 alias.
        "import tensorflow.compat.v1 as tf\n\n\ndef build():\n    x = tf.placeholder(tf.float32)\n"
        "    return tf.Variable(0, trainable=False)\n",
    ],
)
def test_variable_left_alone(source):
    assert codemod.migrate_source(source).code == source


# --- tf.layers -> tf.compat.v1.layers, and TF_USE_LEGACY_KERAS for scripts ---------------------

KERAS_LINES = (
    "# tf.compat.v1 layers need Keras 2 (tf-keras), set before TF loads.\n"
    'os.environ["TF_USE_LEGACY_KERAS"] = "1"\n'
)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "import tensorflow as tf\n\nnet = tf.layers.dense(x, 10)\n",
            "import tensorflow as tf\n\nnet = tf.compat.v1.layers.dense(x, 10)\n",
        ),
        (
            "import tensorflow as tf\n\nlayer = tf.layers.Dense(10, name='fc')\n",
            "import tensorflow as tf\n\nlayer = tf.compat.v1.layers.Dense(10, name='fc')\n",
        ),
        (
            "from tensorflow.layers import dense, flatten\n\nnet = dense(flatten(x), 10)\n",
            "from tensorflow.compat.v1.layers import dense, flatten\n\n"
            "net = dense(flatten(x), 10)\n",
        ),
        (
            "from tensorflow import layers\n\nnet = layers.dense(x, 10)\n",
            "from tensorflow.compat.v1 import layers\n\nnet = layers.dense(x, 10)\n",
        ),
        (
            "import tensorflow.layers as tl\n\nnet = tl.dense(x, 10)\n",
            "import tensorflow.compat.v1.layers as tl\n\nnet = tl.dense(x, 10)\n",
        ),
        (
            "import tensorflow.layers\n\nnet = tensorflow.layers.dense(x, 10)\n",
            "import tensorflow.compat.v1.layers\n\n"
            "net = tensorflow.compat.v1.layers.dense(x, 10)\n",
        ),
    ],
)
def test_layers_of_a_library_module_move_with_a_note(before, after):
    [note] = _expect(before, after, findings=[(3, False)])
    assert (
        "uses tf.compat.v1.layers, which needs Keras 2 on TensorFlow 2.16 and later" in note.message
    )
    assert (
        'must set os.environ["TF_USE_LEGACY_KERAS"] = "1" before it first imports' in note.message
    )
    assert "pip install 'tf-keras==X.Y.*'" in note.message


def test_layers_imported_from_tensorflow_with_other_names_gets_an_import_of_its_own():
    _expect(
        """\
        from tensorflow import constant, layers as tl, summary

        net = tl.dense(constant([[1.0]]), 2)
        """,
        """\
        from tensorflow import constant, summary
        from tensorflow.compat.v1 import layers as tl

        net = tl.dense(constant([[1.0]]), 2)
        """,
        findings=[(4, False)],
    )


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (  # Docstring and __future__ first; os imported here.
            '"""Trains."""\nfrom __future__ import print_function\n\nimport argparse\n'
            "import tensorflow as tf\n",
            '"""Trains."""\nfrom __future__ import print_function\n\nimport argparse\n'
            f"import os\n\n{KERAS_LINES}\nimport tensorflow as tf\n",
        ),
        (  # os imported already: only the assignment, before any third-party import.
            "import os\nimport sys\n\nimport numpy as np\nimport tensorflow as tf\n",
            f"import os\nimport sys\n\n{KERAS_LINES}\n"
            "import numpy as np\nimport tensorflow as tf\n",
        ),
        (  # A local module may import TensorFlow itself: the switch goes before it.
            "import sys\n\nsys.path.insert(0, '.')\n# Our model.\nimport model\n"
            "import tensorflow as tf\n",
            "import sys\n\nsys.path.insert(0, '.')\nimport os\n\n"
            f"{KERAS_LINES}\n# Our model.\nimport model\nimport tensorflow as tf\n",
        ),
        (  # Set already (by hand, or by an earlier run): nothing added.
            f"import os\n\n{KERAS_LINES}\nimport tensorflow as tf\n",
            f"import os\n\n{KERAS_LINES}\nimport tensorflow as tf\n",
        ),
    ],
)
def test_script_using_layers_sets_legacy_keras_before_tensorflow(before, after):
    body = "\nnet = tf.layers.dense(x, 10)\n\nif __name__ == '__main__':\n    pass\n"
    migrated_body = body.replace("tf.layers", "tf.compat.v1.layers")
    findings = _expect(before + body, after + migrated_body)
    [note] = findings
    assert not note.unconverted
    assert (after + migrated_body).splitlines()[note.line - 1].startswith("net = ")
    assert "The script sets TF_USE_LEGACY_KERAS=1 before it imports TensorFlow" in note.message
    assert "pip install 'tf-keras==X.Y.*'" in note.message


def test_rnn_cells_need_the_switch_too_and_other_scripts_do_not():
    source = "import tensorflow as tf\n\ncell = tf.compat.v1.nn.rnn_cell.LSTMCell(8)\n"
    main = "\nif __name__ == '__main__':\n    pass\n"
    assert KERAS_LINES in codemod.migrate_source(source + main).code
    plain = "import tensorflow as tf\n\nx = tf.constant(1)\n" + main
    assert codemod.migrate_source(plain).code == plain


# --- TF1 summaries in graph modules ------------------------------------------------------------

SUMMARY_SCRIPT = """\
import tensorflow as tf

tf.compat.v1.disable_v2_behavior()

x = tf.compat.v1.placeholder(tf.float32)
{call}
merged = tf.compat.v1.summary.merge_all()
writer = tf.compat.v1.summary.FileWriter("/tmp/logs")
"""


@pytest.mark.parametrize(
    "call",
    [
        'tf.summary.scalar("loss", x)',
        'tf.summary.histogram("x", x)',
        'tf.summary.image("x", x)',
        'tf.summary.audio("x", x, 16000)',
        'tf.summary.text("x", tf.as_string(x))',
    ],
)
def test_tf1_summary_ops_of_a_graph_module_become_compat_v1(call):
    moved = call.replace("tf.summary.", "tf.compat.v1.summary.")
    _expect(SUMMARY_SCRIPT.format(call=call), SUMMARY_SCRIPT.format(call=moved), findings=[])


def test_summary_names_only_tf1_had_move_in_any_module():
    _expect(
        """\
        import tensorflow as tf
        from tensorflow import summary

        merged = tf.summary.merge_all()
        writer = tf.summary.FileWriter("/tmp/logs")
        tf.summary.scalar("loss", 1.0)  # No graph here: TF 2's op.
        """,
        """\
        import tensorflow as tf
        from tensorflow import summary

        merged = tf.compat.v1.summary.merge_all()
        writer = tf.compat.v1.summary.FileWriter("/tmp/logs")
        tf.summary.scalar("loss", 1.0)  # No graph here: TF 2's op.
        """,
    )


def test_summary_module_imported_by_name_in_a_graph_module():
    _expect(
        """\
        import tensorflow as tf
        from tensorflow import summary

        x = tf.compat.v1.placeholder(tf.float32)
        summary.scalar("x", x)
        """,
        """\
        import tensorflow as tf
        from tensorflow.compat.v1 import summary

        tf.compat.v1.disable_v2_behavior()

        x = tf.compat.v1.placeholder(tf.float32)
        summary.scalar("x", x)
        """,
    )


@pytest.mark.parametrize(
    "tf2_use",
    [
        'writer = tf.summary.create_file_writer("/tmp/logs")',
        "with tf.summary.record_if(True):\n    pass",
        'tf.summary.scalar("loss", x, step=1)',
        'tf.compat.v2.summary.scalar("loss", x, step=1)',
    ],
)
def test_summary_ops_stay_where_tf2_summaries_are_used(tf2_use):
    source = (
        "import tensorflow as tf\n\ntf.compat.v1.disable_eager_execution()\n"
        "x = tf.compat.v1.placeholder(tf.float32)\n"
        f'tf.summary.scalar("x", x)\n{tf2_use}\n'
    )
    assert codemod.migrate_source(source).code == source


# --- Local copies of contrib's module ---------------------------------------------------------


@pytest.mark.parametrize(
    ("imports", "migrated", "module"),
    [
        (
            "from elastic_average_optimizer import ElasticAverageOptimizer, "
            "ElasticAverageCustomGetter",
            "from tf_contrib_easgd import ElasticAverageOptimizer, ElasticAverageCustomGetter",
            "elastic_average_optimizer",
        ),
        (
            "from my_easgd import (ElasticAverageOptimizer as EAO, ElasticAverageCustomGetter,\n"
            "    LOCAL_VARIABLE_NAME, GLOBAL_VARIABLE_NAME, GLOBAL_STEP)",
            "from tf_contrib_easgd import (ElasticAverageOptimizer as EAO, "
            "ElasticAverageCustomGetter,\n"
            "    LOCAL_VARIABLE_NAME, GLOBAL_VARIABLE_NAME, GLOBAL_STEP)",
            "my_easgd",
        ),
        (
            "from .third_party.easgd import ElasticAverageOptimizer, _ElasticAverageOptimizerHook",
            "from tf_contrib_easgd import ElasticAverageOptimizer, "
            "ElasticAverageOptimizerHook as _ElasticAverageOptimizerHook",
            ".third_party.easgd",
        ),
    ],
)
def test_from_import_of_a_local_copy(imports, migrated, module):
    body = "\n\ndef build(sgd, getter):\n    return getter\n"
    # The copy's note, then the note of a library module that builds graphs.
    note, _ = _expect(imports + body, migrated + body, findings=[(1, False), (1, False)])
    assert f"came from {module}, which looks like a local copy of contrib's" in note.message
    assert "Delete the copy when nothing else uses it" in note.message


def test_copy_import_split_when_it_brings_other_names():
    _expect(
        """\
        import tensorflow as tf
        from my_easgd import ElasticAverageOptimizer, make_cluster

        opt = ElasticAverageOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), 2, g)
        """,
        """\
        import tensorflow as tf
        from my_easgd import make_cluster
        from tf_contrib_easgd import ElasticAverageOptimizer

        opt = ElasticAverageOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), 2, g)
        """,
        # The library note; the copy's note, on the line that now imports the name; the
        # optimizer's note on contrib's defaults.
        findings=[(1, False), (3, False), (5, False)],
    )


def test_module_alias_of_a_copy_is_rewritten_and_its_import_removed():
    findings = _expect(
        """\
        import tensorflow as tf
        import elastic_average_optimizer as eao

        getter = eao.ElasticAverageCustomGetter("/job:worker/task:0")
        opt = eao.ElasticAverageOptimizer(sgd, 2, getter)
        centre = eao.GLOBAL_VARIABLE_NAME
        """,
        """\
        import tensorflow as tf
        import tf_contrib_easgd

        getter = tf_contrib_easgd.ElasticAverageCustomGetter("/job:worker/task:0")
        opt = tf_contrib_easgd.ElasticAverageOptimizer(sgd, 2, getter)
        centre = tf_contrib_easgd.GLOBAL_VARIABLE_NAME
        """,
        findings=[(1, False), (4, False), (5, False)],
    )
    assert findings[1].message.startswith(
        "eao.ElasticAverageCustomGetter, eao.ElasticAverageOptimizer, eao.GLOBAL_VARIABLE_NAME "
        "came from elastic_average_optimizer"
    )


def test_copy_still_used_for_other_names_keeps_its_import():
    _expect(
        """\
        import my_easgd

        opt = my_easgd.ElasticAverageOptimizer(sgd, 2, my_easgd.make_getter())
        """,
        """\
        import my_easgd
        import tf_contrib_easgd

        opt = tf_contrib_easgd.ElasticAverageOptimizer(sgd, 2, my_easgd.make_getter())
        """,
    )


def test_star_import_of_a_copy_is_reported():
    source = "from elastic_average_optimizer import *\n\nopt = ElasticAverageOptimizer(a, 2, g)\n"
    [finding] = _expect(source, source, findings=[(1, True)])
    assert "`from elastic_average_optimizer import *` takes EASGD from" in finding.message


def test_the_copy_itself_is_reported_and_left_alone():
    source = textwrap.dedent(
        """\
        from tensorflow.python.training import optimizer

        LOCAL_VARIABLE_NAME = "local_center_variable"


        class ElasticAverageCustomGetter(object):
            pass


        class ElasticAverageOptimizer(optimizer.Optimizer):
            def __init__(self, opt, num_worker, ea_custom_getter):
                self._global_step = tf.Variable(0)
        """
    )
    [finding] = _expect(source, source, findings=[(6, True)])
    assert "looks like a local copy of contrib's elastic_average_optimizer.py" in finding.message
    assert "delete it once nothing imports it" in finding.message


def test_a_subclass_of_ours_is_not_a_copy():
    source = (
        "import tf_contrib_easgd\n\n\n"
        "class ElasticAverageOptimizer(tf_contrib_easgd.ElasticAverageOptimizer):\n    pass\n"
    )
    assert codemod.migrate_source(source).findings == ()


# --- Hand edits for the other tf.contrib uses -------------------------------------------------


@pytest.mark.parametrize(
    ("use", "hand_edit"),
    [
        ("tf.contrib.layers.xavier_initializer()", "tf.compat.v1.glorot_uniform_initializer()"),
        (
            "tf.contrib.layers.fully_connected(x, 10)",
            "tf.compat.v1.layers.dense(inputs, NUM_OUTPUTS, activation=tf.nn.relu)",
        ),
        ("tf.contrib.layers.l2_regularizer(0.1)", "`lambda w: SCALE * tf.nn.l2_loss(w)`"),
        ("tf.contrib.layers.batch_norm(x)", "tf.compat.v1.layers.batch_normalization("),
        ("tf.contrib.framework.get_global_step()", "tf.compat.v1.train.get_global_step()"),
        ("tf.contrib.rnn.LSTMCell(8)", "tf.compat.v1.nn.rnn_cell"),
        # slim's public names become tf-slim's; a path into contrib's internals stays.
        ("tf.contrib.slim.python.slim.learning.train_step(s)", "pip install tf-slim"),
        (
            "tf.contrib.learn.datasets.mnist.read_data_sets('/tmp/mnist')",
            "tf.keras.datasets.mnist.load_data()",
        ),
        (
            "tf.contrib.image.rotate(x, 1.0)",
            "tf_contrib_easgd replaces only Elastic Averaging SGD: find the TF 2 counterpart",
        ),
    ],
)
def test_other_contrib_uses_name_the_hand_edit(use, hand_edit):
    source = f"import tensorflow as tf\n\ny = {use}\n"
    [finding] = _expect(source, source, findings=[(3, True)])
    assert finding.message.startswith(f"`{use.partition('(')[0]}` (tensorflow.contrib.")
    assert hand_edit in finding.message


# Each name TF1 scripts import or call -> the kind of advice it must get: a data loader gets
# data advice, a model module model advice, and so on (issue 27: the MNIST tutorial's model
# module was told how to load data, contrib.learn's dataset loaders how to train).
ADVICE_KINDS = [
    ("tensorflow.contrib.layers.xavier_initializer", hand_edits.INITIALIZER),
    ("tensorflow.contrib.layers.variance_scaling_initializer", hand_edits.INITIALIZER),
    ("tensorflow.contrib.layers.fully_connected", hand_edits.LAYER),
    ("tensorflow.contrib.layers.batch_norm", hand_edits.LAYER),
    ("tensorflow.contrib.layers.l2_regularizer", hand_edits.REGULARIZER),
    ("tensorflow.contrib.layers.apply_regularization", hand_edits.REGULARIZER),
    ("tensorflow.contrib.framework.get_or_create_global_step", hand_edits.GLOBAL_STEP),
    ("tensorflow.contrib.framework.arg_scope", hand_edits.LIBRARY),
    ("tensorflow.contrib.slim.nets.resnet_v1", hand_edits.LIBRARY),
    ("tensorflow.contrib.rnn.BasicLSTMCell", hand_edits.LAYER),
    ("tensorflow.contrib.losses.softmax_cross_entropy", hand_edits.LOSS),
    ("tensorflow.contrib.metrics.streaming_accuracy", hand_edits.METRIC),
    ("tensorflow.contrib.learn.Estimator", hand_edits.TRAINING),
    ("tensorflow.contrib.learn.Experiment", hand_edits.TRAINING),
    ("tensorflow.contrib.learn.python.learn.learn_runner", hand_edits.TRAINING),
    ("tensorflow.contrib.learn.datasets.mnist.read_data_sets", hand_edits.DATA),
    ("tensorflow.contrib.learn.python.learn.datasets.mnist", hand_edits.DATA),
    ("tensorflow.contrib.learn.datasets.load_dataset", hand_edits.DATA),
    ("tensorflow.contrib.learn.datasets.base.load_csv_with_header", hand_edits.DATA),
    ("tensorflow.contrib.learn.python.learn.datasets.base", hand_edits.DATA),
    ("tensorflow.contrib.learn.preprocessing.VocabularyProcessor", hand_edits.PREPROCESSING),
    ("tensorflow.examples.tutorials.mnist", hand_edits.DATA),
    ("tensorflow.examples.tutorials.mnist.input_data", hand_edits.DATA),
    ("tensorflow.examples.tutorials.mnist.input_data.read_data_sets", hand_edits.DATA),
    ("tensorflow.examples.tutorials.mnist.mnist", hand_edits.MODEL),
    ("tensorflow.examples.tutorials.mnist.mnist.inference", hand_edits.MODEL),
    ("tensorflow.contrib.image.rotate", None),
    ("tensorflow.contrib.layers", None),  # The module: its parts are of many kinds.
]
# Words the text of each kind of advice must use: the text fits its kind, as the kind fits
# the name.
KIND_WORDS = {
    hand_edits.DATA: ("load",),
    hand_edits.MODEL: ("model", "get_variable"),
    hand_edits.LAYER: ("tf.compat.v1.",),
    hand_edits.INITIALIZER: ("initializer",),
    hand_edits.REGULARIZER: ("tf.",),
    hand_edits.GLOBAL_STEP: ("global_step",),
    hand_edits.LIBRARY: ("tf-slim",),
    hand_edits.LOSS: ("tf.compat.v1.losses",),
    hand_edits.METRIC: ("tf.compat.v1.metrics",),
    hand_edits.TRAINING: ("MonitoredTrainingSession",),
    hand_edits.PREPROCESSING: ("TextVectorization",),
}


@pytest.mark.parametrize(("name", "kind"), ADVICE_KINDS)
def test_advice_fits_the_name_it_is_attached_to(name, kind):
    advice = hand_edits.advice(name)
    assert (advice.kind if advice else None) == kind
    if advice:
        assert all(word in advice.text for word in KIND_WORDS[kind]), advice.text


def test_every_entry_has_a_kind_whose_words_its_text_uses():
    for name, advice in hand_edits.HAND_EDITS.items():
        assert advice.kind in KIND_WORDS, name
        assert all(word in advice.text for word in KIND_WORDS[advice.kind]), name
    assert {kind for _, kind in ADVICE_KINDS} - {None} == set(KIND_WORDS)


def test_an_import_of_a_data_loader_and_a_model_module_gets_both_pieces():
    source = (
        "from tensorflow.examples.tutorials.mnist import input_data, mnist\n\n"
        "data, logits = input_data, mnist\n"
    )
    [finding] = _expect(source, source, findings=[(1, True)])
    assert "input_data: tf.keras.datasets.mnist.load_data()" in finding.message
    assert "mnist: the tutorial's model functions (inference, loss" in finding.message


def test_tensorflow_examples_mnist_import_is_reported():
    source = "from tensorflow.examples.tutorials.mnist import input_data\n\nd = input_data\n"
    [finding] = _expect(source, source, findings=[(1, True)])
    assert "fails on TF 2, which has no tensorflow.examples:" in finding.message
    assert "tf.keras.datasets.mnist.load_data()" in finding.message


@pytest.mark.subprocess
@pytest.mark.skipif(not HAS_TF_KERAS, reason="needs tf-keras for tf.compat.v1.layers")
def test_every_name_in_the_hand_edits_exists_in_tensorflow(tmp_path):
    names = sorted(
        {
            name
            for text in (advice.text for advice in hand_edits.HAND_EDITS.values())
            for name in re.findall(r"\btf(?:\.\w+)+", text)
            if not name.startswith("tf.contrib")
        }
    )
    check = (
        f'import os\nos.environ["TF_USE_LEGACY_KERAS"] = "1"\nimport tensorflow as tf\n\n'
        f"for name in {names!r}:\n    eval(name)\nprint('ok', {len(names)})\n"
    )
    done = run_python_script(check, tmp_path)
    assert done.stdout.strip() == f"ok {len(names)}", done.stderr[-3000:]


# --- Python 2 sources, empty files, atomic writes ---------------------------------------------


@pytest.mark.parametrize(
    ("source", "line", "detail"),
    [
        ("import os\n\ndef f(x):\n    if x:\n\treturn 1\n    return 2\n", 5, "tabs and spaces"),
        ('import os\nprint "hello"\n', 2, "Missing parentheses in call to 'print'"),
        ("try:\n    pass\nexcept ValueError, error:\n    pass\n", 3, "must be parenthesized"),
        ("x = 0777\n", 1, "leading zeros"),
        ('raise ValueError, "bad"\n', 1, "invalid syntax"),
        ("x = `y`\n", 1, "invalid syntax"),
    ],
)
def test_python2_source_says_how_to_convert_it(tmp_path, source, line, detail):
    script = tmp_path / "old.py"
    script.write_text(source)
    status, out, err = _run(script)
    assert (status, out) == (migrate.EXIT_ERROR, "")
    assert f"{script}:{line}: cannot migrate: " in err
    assert "looks like Python 2 source" in err and detail in err
    assert f"    expand -i -t 8 {script} > {script}.new && mv {script}.new {script}\n" in err
    assert f"    python3.12 -m lib2to3 -w -n {script}\n" in err
    assert f"    tf_upgrade_v2 --infile {script} --outfile {script}\n" in err
    assert f"    easgd-migrate {script}\n" in err
    assert script.read_text() == source
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.py"]


def test_empty_file_points_back_to_tf_upgrade_v2(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "__init__.py").write_text("")  # An empty package file is normal.
    status, _, err = _run(tmp_path)
    assert status == migrate.EXIT_ERROR
    assert f"{tmp_path / 'train.py'}:1: cannot migrate: the file is empty." in err
    assert "tf_upgrade_v2 writes an empty output file when it fails to parse its input" in err
    assert f"    tf_upgrade_v2 --infile ORIGINAL --outfile {tmp_path / 'train.py'}\n" in err
    assert "__init__.py" not in err


LEGACY = "import tensorflow as tf\n\ngetter = tf.contrib.opt.ElasticAverageCustomGetter('')\n"


def test_a_failed_write_leaves_the_file_whole(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(LEGACY)

    def refuse(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(migrate.os, "replace", refuse)
    status, _, err = _run(script)
    assert status == migrate.EXIT_ERROR
    assert f"{script}: cannot migrate: [Errno 28] No space left on device" in err
    assert script.read_text() == LEGACY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # No temporary, no .bak.


def test_rewrite_keeps_permissions_and_symbolic_links(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY)
    script.chmod(0o755)
    link = tmp_path / "link.py"
    link.symlink_to(script)
    _run(link)
    assert link.is_symlink()
    assert "tf_contrib_easgd.ElasticAverageCustomGetter" in script.read_text()
    assert oct(script.stat().st_mode & 0o777) == oct(0o755)
    assert (tmp_path / "link.py.bak").read_text() == LEGACY


def test_dry_run_prints_the_diff_and_every_finding(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import tensorflow as tf\nfrom my_easgd import ElasticAverageOptimizer\n\n"
        "net = tf.layers.dense(x, 2)\ninit = tf.contrib.layers.xavier_initializer()\n"
    )
    before = script.read_text()
    status, out, err = _run(script, dry_run=True)
    assert status == migrate.EXIT_UNCONVERTED
    assert "+net = tf.compat.v1.layers.dense(x, 2)\n" in out
    assert "+from tf_contrib_easgd import ElasticAverageOptimizer\n" in out
    assert f"{script}:2: note: ElasticAverageOptimizer came from my_easgd" in err
    assert f"{script}:4: note: uses tf.compat.v1.layers" in err
    assert f"{script}:5: not converted: `tf.contrib.layers.xavier_initializer`" in err
    assert script.read_text() == before


# --- Migrated scripts run (a fresh process: the Keras switch acts before TensorFlow loads) ----

TF1_SCRIPT = '''\
"""A 2018-style graph script: tf.layers, a tf.Variable global step, TF1 summaries."""
from __future__ import print_function

import os
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import variables


def main(_):
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.placeholder(tf.int64, [None])
    logits = tf.layers.dense(tf.layers.dense(x, 8, activation=tf.nn.relu), 2)
    loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
    tf.summary.scalar("loss", loss)
    merged = tf.summary.merge_all()
    global_step = tf.Variable(0, name="global_step", trainable=False)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    logdir = tempfile.mkdtemp()
    writer = tf.summary.FileWriter(logdir)
    data = np.random.RandomState(0).rand(16, 4).astype(np.float32)
    feed = {x: data, y: (data[:, 0] > 0.5).astype(np.int64)}
    runs = 0
    with tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(last_step=5)]) as sess:
        while not sess.should_stop():
            writer.add_summary(sess.run([train_op, merged], feed)[1], runs)
            runs += 1
    writer.close()
    with tf.Graph().as_default():  # The internal spelling of TensorFlow's own tests.
        variables.Variable(0, name="global_step", trainable=False)
        internal = tf.train.get_global_step().dtype.base_dtype.name
    events = tf.train.summary_iterator(os.path.join(logdir, os.listdir(logdir)[0]))
    tags = {value.tag for event in events for value in event.summary.value}
    print("runs", runs, "internal", internal, "tags", sorted(tags))


if __name__ == "__main__":
    tf.app.run()
'''


@pytest.mark.subprocess
@pytest.mark.skipif(not HAS_TF_KERAS, reason="needs tf-keras for tf.compat.v1.layers")
def test_tf1_script_runs_after_both_tools(tmp_path):
    from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2  # noqa: PLC0415

    before, after = tmp_path / "before.py", tmp_path / "after.py"
    before.write_text(TF1_SCRIPT)
    ast_edits.ASTCodeUpgrader(tf_upgrade_v2.TFAPIChangeSpec()).process_file(str(before), str(after))
    migration = codemod.migrate_source(after.read_text())
    assert not [f for f in migration.findings if f.unconverted]
    assert codemod.migrate_source(migration.code).code == migration.code
    done = run_python_script(migration.code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "runs 5 internal int32 tags ['loss']"
