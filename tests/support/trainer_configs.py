"""easgd-train's configurations in tests: a small job's `TrainConfig`, and a TF_CONFIG.

`train_config` is the job of tests/unit/test_task.py and tests/cluster/test_task_cluster.py
(60 steps of the MLP on digits); `tf_config` is a task of a three-task cluster for the
tests of easgd-train's flags (tests/unit/test_train.py, tests/e2e/test_train_e2e.py).
"""

import json

from tf_contrib_easgd.trainer.config import TrainConfig

# The hosts of `tf_config`'s cluster: the chief, a worker and a ps.
W0, W1, PS = "localhost:2220", "localhost:2221", "localhost:2222"


def train_config(model_dir, **overrides):
    """A small job's `TrainConfig`: 60 steps of the MLP on digits, momentum, tau 5.

    Args:
        model_dir: The job's `--model_dir`.
        **overrides: Fields that differ from these values.
    """
    values = dict(
        steps=60,
        batch_size=32,
        optimizer="momentum",
        learning_rate=0.05,
        communication_period=5,
        moving_rate=None,
        rho=0.0,
        synchronous=False,
        overlap=False,
        model="mlp",
        dataset="digits",
        model_dir=str(model_dir),
        save_checkpoint_steps=25,
        seed=0,
        log_every_steps=20,
        eval_every_steps=30,
        timeout_secs=30.0,
    )
    values.update(overrides)
    return TrainConfig(**values)


def tf_config(task_type, index):
    """The TF_CONFIG (JSON text) of task `task_type` `index` in a cluster of W0 (the chief),
    W1 (a worker) and PS."""
    return json.dumps(
        {
            "cluster": {"chief": [W0], "worker": [W1], "ps": [PS]},
            "task": {"type": task_type, "index": index},
        }
    )
