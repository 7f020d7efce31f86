"""Checkpoints move both ways between tf.contrib.opt's EASGD and this library.

Real checkpoints, both ways (contrib_oracle.py runs the processes; `make test-contrib`
builds the TensorFlow 1.15 interpreter they need, and without it those tests skip): the
scenario `checkpoint_momentum_period2` of contrib_scenarios.py (two workers, Momentum,
period 2, eight interleaved steps) is trained by the original `tf.contrib.opt` on TF 1.15
and by this package in both variable worlds. Each writes three checkpoints from worker 0:

- "default": the default `Saver()` of MonitoredTrainingSession (global variables: the
  centres and the global step);
- "full": a Saver of the global and local variables (worker copies, local centres,
  `local_step`, Momentum's slots too);
- "swapping": `swapping_saver()`, the centres under the original names (contrib left out
  the global step, contrib fix 7), restored with `swapping_saver(var_list=<the trainable
  variables>)`.

A new job restores each checkpoint (after initializing everything), runs the hook's
start-up (worker copies and local centres <- the centre) and trains six steps. Contrib's
checkpoints, continued by the package, must give contrib's own continuation of them; the
package's, continued by contrib, the package's own continuation. The restored values must
be the checkpoint's bit for bit.

Without TensorFlow 1.15, `test_library_makes_contrib_names_dtypes_shapes_and_collections`
still checks the library's variables against a table of what contrib made for a small
Momentum model, in both worlds (`world` fixture); test_contrib_oracle.py checks the names,
collections and devices of every scenario against contrib itself.
"""

import pytest
import tensorflow as tf
from clusters import is_resource
from contrib_oracle import (
    CHECKPOINT_KINDS,
    TEST_TIMEOUT_SECS,
    WORLDS,
    array,
    assert_trajectories_match,
    assert_values_match,
    skip_reason,
)
from contrib_oracle import oracle as run_oracle

from tf_contrib_easgd import (
    GLOBAL_STEP,
    GLOBAL_VARIABLE_NAME,
    LOCAL_VARIABLE_NAME,
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
)

DEVICE = "/cpu:0"
SHAPES = {"mlp/w": [2, 3], "mlp/b": [3]}
GLOBAL, LOCAL = "global", "local"

# Name -> (collection, dtype, shape) of every variable contrib made for this model.
CONTRIB_VARIABLES = {
    **{f"{GLOBAL_VARIABLE_NAME}/{n}": (GLOBAL, tf.float32, s) for n, s in SHAPES.items()},
    GLOBAL_STEP: (GLOBAL, tf.int64, []),
    **{n: (LOCAL, tf.float32, s) for n, s in SHAPES.items()},  # The worker copies.
    **{f"{LOCAL_VARIABLE_NAME}/{n}": (LOCAL, tf.float32, s) for n, s in SHAPES.items()},
    **{f"{n}/Momentum": (LOCAL, tf.float32, s) for n, s in SHAPES.items()},
    "local_step": (LOCAL, tf.int32, []),
}


def _build_library_graph():
    """Builds the same model with this library; returns ({name: variable}, optimizer)."""
    getter = ElasticAverageCustomGetter(worker_device=DEVICE)
    with (
        tf.compat.v1.device(DEVICE),
        tf.compat.v1.variable_scope("", custom_getter=getter),
    ):
        with tf.compat.v1.variable_scope("mlp"):
            w = tf.compat.v1.get_variable("w", SHAPES["mlp/w"])
            b = tf.compat.v1.get_variable("b", SHAPES["mlp/b"])
        loss = tf.reduce_sum(tf.matmul(tf.ones([1, 2]), w) + b)
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
            num_worker=2,
            ea_custom_getter=getter,
            communication_period=4,
            rho=0.0,
        )
        opt.minimize(loss, global_step=global_step)
    variables = tf.compat.v1.global_variables() + tf.compat.v1.local_variables()
    return {v.op.name: v for v in variables}, opt


def _collections():
    """Maps each variable name of the default graph to GLOBAL or LOCAL."""
    return {
        **{v.op.name: GLOBAL for v in tf.compat.v1.global_variables()},
        **{v.op.name: LOCAL for v in tf.compat.v1.local_variables()},
    }


def test_library_makes_contrib_names_dtypes_shapes_and_collections(world):
    with tf.Graph().as_default():
        variables, _ = _build_library_graph()
        made = {
            name: (collection, variables[name].dtype.base_dtype, variables[name].shape.as_list())
            for name, collection in _collections().items()
        }
        assert all(is_resource(v) == (world == "tf2") for v in variables.values())
    assert made == CONTRIB_VARIABLES


CHECKPOINT_SCENARIO = "checkpoint_momentum_period2"


def oracle_test(function):
    """Marks a test that runs the oracle's processes (TF 1.15 and this package), on the
    pytest-xdist worker of test_contrib_oracle.py, whose oracle run it shares."""
    function = pytest.mark.xdist_group("contrib_oracle")(
        pytest.mark.timeout(TEST_TIMEOUT_SECS)(function)
    )
    return pytest.mark.cluster(pytest.mark.e2e(function))


@pytest.fixture(scope="module")
def oracle(request, tmp_path_factory):
    """Contrib's and the package's runs of the checkpoint scenario (once per session)."""
    if skip_reason():
        pytest.skip(skip_reason())
    # All scenarios when test_contrib_oracle.py runs in this session too (one run for
    # both files), else the checkpoint scenario only.
    everything = any(item.path.name == "test_contrib_oracle.py" for item in request.session.items)
    return run_oracle(tmp_path_factory, None if everything else [CHECKPOINT_SCENARIO])


def _checkpoint(result, kind):
    """The contents of the `kind` checkpoint a training run wrote: {name: value}."""
    if kind == "swapping":
        return result["swapping_checkpoint"]
    return result["checkpoints"][kind]


def _restored(kind, checkpoint, snapshot):
    """Pairs a checkpoint's values with the snapshot's values of what was restored from it.

    Returns:
        ({checkpoint name: value in the checkpoint}, {checkpoint name: value restored}).
        `swapping_saver(var_list=<the trainable variables>)` restores the centres only.
    """
    values = snapshot["values"]
    stored, restored = {}, {}
    for name, value in checkpoint.items():
        if kind == "swapping":
            if name == GLOBAL_STEP:
                continue
            key = f"{GLOBAL_VARIABLE_NAME}/{name}"  # The centre, saved under the name.
        else:
            key = name if name in values else f"worker0:{name}"
        stored[name], restored[name] = value, values[key]
    return stored, restored


@oracle_test
@pytest.mark.parametrize("kind", CHECKPOINT_KINDS)
@pytest.mark.parametrize("world", sorted(WORLDS))
def test_package_writes_the_checkpoints_contrib_writes(oracle, world, kind):
    theirs = _checkpoint(oracle.result("contrib", CHECKPOINT_SCENARIO), kind)
    ours = _checkpoint(oracle.result(f"package-{world}", CHECKPOINT_SCENARIO), kind)
    extra = {GLOBAL_STEP} if kind == "swapping" else set()  # contrib fix 7.
    assert set(ours) == set(theirs) | extra
    if kind == "default":
        assert sorted(theirs) == sorted(
            [GLOBAL_STEP, *(f"{GLOBAL_VARIABLE_NAME}/model/{n}" for n in ("w1", "b1", "w2", "b2"))]
        )
    # Written after the same training: equal up to the oracle's float tolerance.
    assert_values_match({name: ours[name] for name in theirs}, theirs, f"{kind} checkpoint")


@oracle_test
@pytest.mark.parametrize("kind", CHECKPOINT_KINDS)
@pytest.mark.parametrize("world", sorted(WORLDS))
def test_contrib_checkpoint_restores_here_and_training_continues_as_in_contrib(oracle, world, kind):
    name = f"{CHECKPOINT_SCENARIO}@contrib-{kind}"
    ours = oracle.result(f"package-{world}", name)
    theirs = oracle.result("contrib", name)
    assert ours["error"] is None, ours["error"]
    checkpoint = _checkpoint(oracle.result("contrib", CHECKPOINT_SCENARIO), kind)
    stored, restored = _restored(kind, checkpoint, ours["steps"][0])
    assert_values_match(restored, stored, f"restored from contrib's {kind}", exact=True)
    # Right after the restore and after the start-up both jobs hold the same numbers bit
    # for bit (the same checkpoint, the same initializers); then the same trajectory.
    for number in (0, 1):
        assert_values_match(
            ours["steps"][number]["values"], theirs["steps"][number]["values"], "", exact=True
        )
    assert_trajectories_match(ours, theirs, f"contrib's {kind} checkpoint in {world}")
    started = ours["steps"][1]["values"]
    centre = started[f"{GLOBAL_VARIABLE_NAME}/model/w1"]
    assert started["worker0:model/w1"] == centre
    assert started[f"worker0:{LOCAL_VARIABLE_NAME}/model/w1"] == centre
    if kind != "swapping":  # The swapping checkpoint has no global step.
        assert array(started[GLOBAL_STEP]) == array(checkpoint[GLOBAL_STEP])


@oracle_test
@pytest.mark.parametrize("kind", CHECKPOINT_KINDS)
@pytest.mark.parametrize("world", sorted(WORLDS))
def test_package_checkpoint_restores_into_contrib_and_training_continues_as_here(
    oracle, world, kind
):
    name = f"{CHECKPOINT_SCENARIO}@package-{world}-{kind}"
    ours = oracle.result(f"package-{world}", name)
    theirs = oracle.result("contrib-restore", name)
    assert theirs["error"] is None, theirs["error"]
    checkpoint = _checkpoint(oracle.result(f"package-{world}", CHECKPOINT_SCENARIO), kind)
    stored, restored = _restored(kind, checkpoint, theirs["steps"][0])
    assert_values_match(restored, stored, f"restored from the package's {kind}", exact=True)
    for number in (0, 1):
        assert_values_match(
            ours["steps"][number]["values"], theirs["steps"][number]["values"], "", exact=True
        )
    assert_trajectories_match(ours, theirs, f"the package's {kind} checkpoint ({world})")
