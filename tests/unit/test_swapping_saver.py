"""swapping_saver: a checkpoint of the centre that a plain model restores (contrib fix 7)."""

import numpy as np
import pytest
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

PARTITIONER = tf.compat.v1.fixed_size_partitioner(2)


def _variables(partitioned):
    """The model's variables: a weight (partitioned or not), a statistic and the global step."""
    w = tf.compat.v1.get_variable(
        "dense/w",
        [4, 2],
        initializer=tf.compat.v1.zeros_initializer(),
        partitioner=PARTITIONER if partitioned else None,
    )
    mean = tf.compat.v1.get_variable(
        "bn/moving_mean", [2], trainable=False, initializer=tf.compat.v1.zeros_initializer()
    )
    step = tf.compat.v1.train.get_or_create_global_step()
    return w, mean, step


def _as_tensor(w):
    return w.as_tensor() if not isinstance(w, tf.Variable) else w.read_value()


def _train_and_save(path, partitioned):
    """Trains 3 local steps with tau 3 and saves; returns the centre, copy and step values."""
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w, mean, step = _variables(partitioned)
        # Loss sum(w): gradient 1 everywhere; lr 1, alpha 0.5, tau 3. After 3 local steps
        # the copy is -3; the exchange gives d = -3 - 0 = -3, copy = -1.5, centre = -1.5.
        # Then one more local step moves only the copy: -2.5, so copy and centre differ.
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0),
            1,
            getter,
            communication_period=3,
            moving_rate=0.5,
            rho=0.0,
        )
        train_op = opt.minimize(tf.reduce_sum(_as_tensor(w)), global_step=step, var_list=[w])
        assign_mean = tf.compat.v1.assign(mean, [0.25, 0.75])
        saver = opt.swapping_saver()
        with tf.compat.v1.Session() as session:
            session.run(
                [
                    tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer(),
                ]
            )
            session.run(assign_mean)
            for _ in range(4):
                session.run(train_op)
            centre = np.concatenate(
                [session.run(e.global_center.read_value()) for e in getter.centered_variables()]
            )
            copy = session.run(_as_tensor(w))
            saver.save(session, path)
    np.testing.assert_array_equal(centre, np.full([4, 2], -1.5))
    np.testing.assert_array_equal(copy, np.full([4, 2], -2.5))
    return centre


@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_plain_model_restores_the_centre_with_its_default_saver(world, tmp_path, partitioned):
    path = str(tmp_path / "model.ckpt")
    centre = _train_and_save(path, partitioned)
    with tf.Graph().as_default():
        w, mean, step = _variables(partitioned)  # No getter, no EASGD.
        with tf.compat.v1.Session() as session:
            tf.compat.v1.train.Saver().restore(session, path)
            restored = session.run([_as_tensor(w), mean.read_value(), step.read_value()])
    np.testing.assert_array_equal(restored[0], centre)
    np.testing.assert_array_equal(restored[1], [0.25, 0.75])
    assert restored[2] == 1  # One exchange in four local steps of period 3.


def test_partitioned_checkpoint_restores_into_an_unpartitioned_plain_model(world, tmp_path):
    path = str(tmp_path / "model.ckpt")
    centre = _train_and_save(path, partitioned=True)
    with tf.Graph().as_default():
        w, _, _ = _variables(partitioned=False)
        with tf.compat.v1.Session() as session:
            tf.compat.v1.train.Saver().restore(session, path)
            np.testing.assert_array_equal(session.run(w.read_value()), centre)


def test_the_same_saver_restores_the_centre_into_the_easgd_graph(world, tmp_path):
    path = str(tmp_path / "model.ckpt")
    centre = _train_and_save(path, partitioned=False)
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            _variables(partitioned=False)
        opt = ElasticAverageOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter)
        saver = opt.swapping_saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.local_variables_initializer())
            saver.restore(session, path)
            session.run(opt.get_init_op(0))
            (entry,) = getter.centered_variables()
            np.testing.assert_array_equal(session.run(entry.global_center.read_value()), centre)
            np.testing.assert_array_equal(session.run(entry.worker.read_value()), centre)


def test_explicit_var_list_swaps_worker_copies_for_centres(world, tmp_path):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w, _, step = _variables(partitioned=False)
        opt = ElasticAverageOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter)
        saver = opt.swapping_saver(var_list=[w, step], max_to_keep=1)
        with tf.compat.v1.Session() as session:
            session.run(
                [
                    tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer(),
                ]
            )
            session.run(tf.compat.v1.assign(getter.find(w).global_center, tf.fill([4, 2], 7.0)))
            path = saver.save(session, str(tmp_path / "model.ckpt"))
    reader = tf.train.load_checkpoint(path)
    assert sorted(reader.get_variable_to_shape_map()) == ["dense/w", "global_step"]
    np.testing.assert_array_equal(reader.get_tensor("dense/w"), np.full([4, 2], 7.0))
