"""A one-variable model whose EASGD trajectory is worked out by hand in the tests."""

import tensorflow as tf

from tf_contrib_easgd import ElasticAverageOptimizer


def build_quadratic(getter, w0, **optimizer_kwargs):
    """Loss 0.5 * w^2 (gradient w) under `getter`, SGD at 0.5 (each local step halves w),
    one worker, rho 0; returns (w, opt, train_op, global_step)."""
    with tf.compat.v1.variable_scope("", custom_getter=getter):
        w = tf.compat.v1.get_variable("w", initializer=tf.constant(w0))
        global_step = tf.compat.v1.train.get_or_create_global_step()
    opt = ElasticAverageOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.5),
        num_worker=1,
        ea_custom_getter=getter,
        rho=0.0,
        **optimizer_kwargs,
    )
    train_op = opt.minimize(0.5 * tf.reduce_sum(tf.square(w)), global_step=global_step)
    return w, opt, train_op, global_step


def trajectory_row(getter, w, opt, global_step):
    """The reads of one row of a worked trajectory: (w, local centre, global centre,
    local_step, global_step)."""
    entry = getter.find(w)
    variables = (w, entry.local_center, entry.global_center, opt.local_step, global_step)
    return [variable.read_value() for variable in variables]
