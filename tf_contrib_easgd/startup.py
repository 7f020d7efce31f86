"""A worker's start from the centre: the init op, after an arrival barrier when synchronous.

`ElasticAverageOptimizer.get_init_op` builds it and the optimizer's hook runs it in every
new session. docs/DESIGN.md ("A worker's start").
"""

import tensorflow as tf


def build_init_op(getter, task_index, num_worker, synchronous, name, wire=None):
    """Builds the op that starts (or restarts) worker `task_index` from the centre.

    It assigns every worker copy and local centre the value of its global centre, and
    with a 16-bit wire each reference on the ps the same read of it; with `synchronous`,
    once every worker has arrived (`arrival_barrier`).

    Args:
        getter: the `ElasticAverageCustomGetter` the model was built with.
        task_index: index of this worker task, checked by the caller.
        num_worker: number of worker tasks.
        synchronous: whether to wait for every worker first.
        name: the optimizer's name, prefix of the ops' names and of the barrier's queues.
        wire: the optimizer's `wire.Wire`, or None. No reference can be made after this:
            the op would not set it.

    Returns:
        An op.

    Raises:
        RuntimeError: if no variable was created through the getter yet.
    """
    centered = getter.centered_variables()
    if not centered:
        raise RuntimeError(
            "No variable was created through the ElasticAverageCustomGetter yet: build "
            "the model under it before calling get_init_op."
        )
    with tf.name_scope(f"{name}_init"):
        arrived = arrival_barrier(task_index, num_worker, centered, name) if synchronous else []
        assigns = []
        with tf.control_dependencies(arrived), tf.compat.v1.device(getter.worker_device):
            referenced = set()
            if wire is not None:
                assigns += wire.init_ops()
                referenced = {entry.global_center.name for entry in wire.entries()}
            for entry in centered:
                if entry.global_center.name in referenced:
                    continue
                centre = tf.identity(entry.global_center.read_value())
                assigns.append(tf.compat.v1.assign(entry.worker, centre).op)
                assigns.append(tf.compat.v1.assign(entry.local_center, centre).op)
        return tf.group(*assigns)


def arrival_barrier(task_index, num_worker, centered, name):
    """Builds a start-up barrier that a restarted worker passes without waiting.

    Worker i owns queue i on the parameter server holding the first centre. On arrival it
    puts a token into every other worker's queue and takes `num_worker - 1` tokens from its
    own, which blocks until all others have arrived. Once through, it puts `num_worker - 1`
    tokens back into its own queue, so that if it restarts later it finds them there and
    passes at once (contrib's barrier trapped such a worker).

    Args:
        task_index: index of this worker task.
        num_worker: number of worker tasks.
        centered: the `CenteredVariable`s; the queues go where the first centre (by name)
            lives.
        name: the optimizer's name, prefix of the queues' shared names.

    Returns:
        A list with the op that completes the barrier (empty for one worker).
    """
    if num_worker == 1:
        return []
    others = num_worker - 1
    anchor = min((entry.global_center for entry in centered), key=lambda v: v.name)
    with tf.compat.v1.device(anchor.device):
        queues = [
            tf.queue.FIFOQueue(
                capacity=-1,
                dtypes=[tf.bool],
                shapes=[[]],
                shared_name=f"{name}_barrier_{j}",
                name=f"barrier_queue_{j}",
            )
            for j in range(num_worker)
        ]
        arrive = [q.enqueue(True) for j, q in enumerate(queues) if j != task_index]
        with tf.control_dependencies(arrive):
            tokens = queues[task_index].dequeue_many(others)
        with tf.control_dependencies([tokens]):
            refill = queues[task_index].enqueue_many(tf.ones([others], tf.bool))
    return [refill]
