"""Per-step overhead: the wrapped optimizer alone vs inside ElasticAverageOptimizer.

In one process with a plain `tf.compat.v1.Session` (no cluster): the same model trained by
`GradientDescentOptimizer` ("sgd"), by `ElasticAverageOptimizer` wrapping it with a period
so long that no measured step exchanges ("easgd"), and, for reference, by the plain
optimizer followed by the cheapest periodic check a graph can make: a step counter and a
`tf.compat.v1.cond` whose branches do nothing ("cond"). Each configuration is built as
several graphs (each graph keeps an offset of its own, a few per cent on the tiny model),
and blocks of steps of all of them alternate (forward order, then backward); the result is
the median time per step over the blocks of each configuration's graphs.
"""

import statistics
import time

import tensorflow as tf

from benchmarks import graphs, models

# A period no run reaches: every measured step is a step that does not exchange.
NEVER = 2**30


#: The configurations measured: what each trains with.
CONFIGS = ("sgd", "easgd", "cond")


def measure(model, blocks, block_secs, graphs_per_config=3, warm_steps=20):
    """Times `blocks` rounds of alternating blocks of steps, of about `block_secs` each.

    Args:
        model: a model name of `models.MODELS`.
        blocks: rounds; each runs one block of every graph.
        block_secs: about how long a block lasts.
        graphs_per_config: graphs built per configuration.
        warm_steps: steps each graph runs before the measure.

    Returns:
        A dict: per configuration ("sgd", "easgd", "cond") the seconds per step of each
        block of each of its graphs ("block_secs_per_step") and their median.
    """
    spec = models.MODELS[model]
    images, labels = models.synthetic_batch(spec)
    runs = {}
    for index in range(graphs_per_config):
        for key in CONFIGS:
            graph, train_op, init = _build(key, spec, images, labels)
            session = tf.compat.v1.Session(graph=graph)
            for op in init:
                session.run(op)
            for _ in range(warm_steps):
                session.run(train_op)
            runs[key, index] = (session, train_op)
    session, train_op = runs["sgd", 0]
    started = time.perf_counter()
    for _ in range(warm_steps):
        session.run(train_op)
    steps_per_block = max(5, round(block_secs * warm_steps / (time.perf_counter() - started)))
    times = {key: [] for key in CONFIGS}
    try:
        for block in range(blocks):
            order = list(runs) if block % 2 == 0 else list(reversed(runs))
            for key, index in order:
                session, train_op = runs[key, index]
                started = time.perf_counter()
                for _ in range(steps_per_block):
                    session.run(train_op)
                times[key].append((time.perf_counter() - started) / steps_per_block)
    finally:
        for session, _ in runs.values():
            session.close()
    medians = {key: statistics.median(values) for key, values in times.items()}
    return {
        "graphs_per_config": graphs_per_config,
        "steps_per_block": steps_per_block,
        "block_secs_per_step": times,
        "median_secs_per_step": medians,
    }


def _build(key, spec, images, labels):
    """Builds configuration `key`; returns (graph, train op, init ops to run in order)."""
    built = graphs.build(
        "local" if key != "easgd" else f"easgd-{NEVER}",
        spec,
        None,
        0,
        1,
        0.01,
        lambda: (tf.constant(images), tf.constant(labels)),
    )
    train_op = built.train_op
    init = list(built.chief_init)
    if key == "cond":
        with built.graph.as_default():
            counter = tf.compat.v1.get_variable(
                "period_counter",
                [],
                tf.int64,
                initializer=tf.compat.v1.zeros_initializer(),
                trainable=False,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
            )
            with tf.control_dependencies([train_op]):
                count = tf.compat.v1.assign_add(counter, 1)
            due = tf.equal(tf.math.floormod(count, NEVER), 0)
            checked = tf.compat.v1.cond(due, lambda: tf.constant(True), lambda: tf.constant(False))
            train_op = tf.group(checked)
            init.append(counter.initializer)
    return built.graph, train_op, init
