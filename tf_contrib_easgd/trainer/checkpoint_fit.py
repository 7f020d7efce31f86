"""Whether the chief's latest checkpoint holds this job's model: its variables and shapes.

`check` compares the checkpoint's variables with the graph's before any session is made and
names what differs: a `--model_dir` of another `--model`, dataset or number of workers (the
work ledger keeps a count per worker). docs/DESIGN.md, "The trainer's task lifecycle".
"""

import tensorflow as tf

from tf_contrib_easgd.trainer.config import UsageError

#: How many names of each kind a message shows.
SHOWN = 4


def check(model_dir, graph):
    """Raises `UsageError` if the latest checkpoint in `model_dir` cannot restore `graph`.

    Args:
        model_dir: the job's `--model_dir`; without a checkpoint there is nothing to check.
        graph: the chief's graph, whose global variables the restore fills.

    Raises:
        UsageError: naming the checkpoint, the variables of `graph` missing from it and
            those whose shapes differ.
    """
    prefix = tf.train.latest_checkpoint(model_dir)
    if prefix is None:
        return
    problem = mismatch(prefix, graph)
    if problem is not None:
        raise UsageError(
            f"the checkpoint {prefix} in --model_dir was written by another job: {problem}. "
            "Run with the flags it was written with (--model, --dataset, --workers), or give "
            "a new --model_dir."
        )


def mismatch(prefix, graph):
    """What keeps the checkpoint `prefix` from restoring the global variables of `graph`.

    Variables of the checkpoint that `graph` lacks do not matter: a restore reads only
    those it needs.

    Returns:
        None if every global variable of `graph` is in the checkpoint with its shape;
        otherwise a sentence naming those that are not (up to `SHOWN` of each kind).
    """
    stored = {name: list(shape) for name, shape in tf.train.list_variables(prefix)}
    with graph.as_default():
        needed = {
            variable.op.name: variable.shape.as_list()
            for variable in tf.compat.v1.global_variables()
        }
    missing = sorted(set(needed) - set(stored))
    reshaped = sorted(name for name in needed if name in stored and stored[name] != needed[name])
    parts = []
    if missing:
        parts.append(f"{len(missing)} variable(s) of this job are not in it ({_few(missing)})")
    if reshaped:
        shapes = [f"{name} {stored[name]} there, {needed[name]} here" for name in reshaped]
        parts.append(f"{len(reshaped)} have another shape ({_few(shapes)})")
    return "; ".join(parts) or None


def _few(items):
    """The first `SHOWN` of `items`, comma-separated, and how many more there are."""
    shown = ", ".join(items[:SHOWN])
    more = len(items) - SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
