"""Ops that run only on some steps: one worker-local Switch gates a whole branch.

The optimizer gates its exchange with `run_every`; the exchange picks its transport with
`branch_gates`. docs/DESIGN.md ("The exchange") says why not `tf.cond`.
"""

import tensorflow as tf


def run_every(period, step, build, name):
    """Runs every op that `build()` makes on the steps where `step % period == 0`.

    Args:
        period: a Python int >= 1; with 1, `build()` runs on every step, ungated.
        step: a scalar integer tensor, the step's count.
        build: as for `run_if`.
        name: name scope of the gating ops (unused with period 1).

    Returns:
        A scalar bool tensor, as `run_if` returns; with period 1, that of `build()`, which
        then waits for `step`.
    """
    if period == 1:
        with tf.control_dependencies([step]):
            return build()
    return run_if(tf.equal(tf.math.floormod(step, period), 0), build, name=name)


def run_if(pred, build, name="run_if"):
    """Runs every op that `build()` makes only when the scalar bool `pred` is true.

    This is the gating of a v1 `tf.cond` with one `Switch` for the whole branch: `build()`
    runs under a control dependency on the Switch's true side, so when `pred` is false each
    of its ops is dead (skipped), whatever its other inputs. `tf.cond` would instead switch
    every tensor the branch captures (one Switch per variable read or written) in TF1, and
    inline a branch function with further Identity nodes per input in TF2; this costs the
    same in both variable worlds and stays on the device of `pred`.

    Args:
        pred: a scalar bool tensor.
        build: a callable taking no argument that builds the branch and returns a scalar
            bool tensor that is ready when the branch is done.
        name: name scope of the gating ops.

    Returns:
        A scalar bool tensor, ready on every step: False when the branch did not run, the
        value of `build()` when it did.
    """
    with tf.name_scope(name):
        skipped, taken = branch_gates(pred)
        with tf.control_dependencies([taken]):
            done = build()
        output, _ = tf.raw_ops.Merge(inputs=[skipped, done])
        return output


def branch_gates(pred):
    """One `Switch` on the scalar bool `pred`, as two tensors to hang ops on by control
    dependency: ops that depend on the first run only when `pred` is false, ops that depend
    on the second only when it is true (the other side is dead, and so is all that depends
    on it).

    Returns:
        (alive when `pred` is false, alive when `pred` is true).
    """
    when_false, when_true = tf.raw_ops.Switch(data=pred, pred=pred)
    return tf.identity(when_false, name="when_false"), tf.identity(when_true, name="when_true")
