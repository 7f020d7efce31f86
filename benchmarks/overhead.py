"""Per-step overhead: the wrapped optimizer alone vs inside ElasticAverageOptimizer.

In one process with a plain `tf.compat.v1.Session` (no cluster): the same model trained by
`GradientDescentOptimizer`, and by `ElasticAverageOptimizer` wrapping it with a period so
long that no measured step exchanges. Blocks of steps of the two alternate (A B A B ...);
the result is the median time per step of each.
"""

import statistics
import time

import tensorflow as tf

from benchmarks import graphs, models

# A period no run reaches: every measured step is a step that does not exchange.
NEVER = 2**30


def measure(model, blocks, block_secs, warm_steps=20):
    """Times `blocks` alternating blocks of each optimizer, of about `block_secs` each.

    Returns:
        A dict: per configuration ("sgd", "easgd") the seconds per step of each block.
    """
    spec = models.MODELS[model]
    images, labels = models.synthetic_batch(spec)
    configs = {"sgd": "local", "easgd": f"easgd-{NEVER}"}
    runs = {}
    for key, config in configs.items():
        built = graphs.build(
            config,
            spec,
            None,
            0,
            1,
            0.01,
            lambda: (tf.constant(images), tf.constant(labels)),
        )
        session = tf.compat.v1.Session(graph=built.graph)
        for op in built.chief_init:
            session.run(op)
        for _ in range(warm_steps):
            session.run(built.train_op)
        runs[key] = (session, built.train_op)
    session, train_op = runs["sgd"]
    started = time.perf_counter()
    for _ in range(warm_steps):
        session.run(train_op)
    steps_per_block = max(5, round(block_secs * warm_steps / (time.perf_counter() - started)))
    times = {key: [] for key in configs}
    try:
        for block in range(blocks):
            order = list(configs) if block % 2 == 0 else list(reversed(configs))
            for key in order:
                session, train_op = runs[key]
                started = time.perf_counter()
                for _ in range(steps_per_block):
                    session.run(train_op)
                times[key].append((time.perf_counter() - started) / steps_per_block)
    finally:
        for session, _ in runs.values():
            session.close()
    medians = {key: statistics.median(values) for key, values in times.items()}
    return {
        "steps_per_block": steps_per_block,
        "block_secs_per_step": times,
        "median_secs_per_step": medians,
    }
