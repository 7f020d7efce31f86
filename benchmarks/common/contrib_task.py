"""One process of the contrib section's TensorFlow 1.15 cluster: the original contrib EASGD.

    .venv-tf115/bin/python -m benchmarks.common.contrib_task --role=worker --index=1 --cluster=JSON

task.py's counterpart under TensorFlow 1.15 (Python 3.7 code). `local` trains the worker's
own variables; `contrib-easgd-P` is `tf.contrib.opt.ElasticAverageOptimizer` with period P,
the default moving rate and rho 0, its getter inside a `replica_device_setter`, as
graphs.py's `easgd-P`.
"""

import os
import re
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.common import models, protocol  # noqa: E402

CONFIGS = re.compile(r"^(local|contrib-easgd-(\d+))$")


class Worker(models.SessionWorker):
    """A worker task: its server and the graph of the configuration being measured."""

    def build(self, config, model, batch_dir, num_workers, container, learning_rate=0.01):
        """Builds `config` on this worker's batch, `<batch_dir>/<model>-worker<index>.npz`."""
        match = CONFIGS.match(config)
        if not match:
            raise ValueError(f"Unknown configuration {config!r}; valid: local, contrib-easgd-P")
        from tensorflow.contrib.opt import (  # noqa: PLC0415 - contrib loads slowly; only here.
            ElasticAverageCustomGetter,
            ElasticAverageOptimizer,
        )

        self.close()
        started, device = time.monotonic(), f"/job:worker/task:{self.index}"
        spec, v1 = protocol.MODELS[model], tf.compat.v1
        with np.load(os.path.join(batch_dir, f"{model}-worker{self.index}.npz")) as arrays:
            self.batch = arrays["images"], arrays["labels"]
        graph = tf.Graph()
        with graph.as_default(), v1.container(container):
            with v1.device(device):
                images, labels = tf.constant(self.batch[0]), tf.constant(self.batch[1])
            sgd = v1.train.GradientDescentOptimizer(learning_rate)
            if config == "local":
                with v1.device(device):
                    params = models.make_params(spec)
                    loss = models.loss(spec, params, images, labels)
                    train_op = sgd.minimize(loss)
                chief_init = worker_init = [
                    v1.global_variables_initializer(),
                    v1.local_variables_initializer(),
                ]
            else:
                getter = ElasticAverageCustomGetter(device)
                setter = models.replica_setter(device, self.cluster_spec)
                with v1.device(setter), v1.variable_scope("", custom_getter=getter):
                    params = models.make_params(spec)
                    global_step = v1.train.get_or_create_global_step()
                    opt = ElasticAverageOptimizer(
                        sgd, num_workers, getter, int(match.group(2)), None, 0.0
                    )
                    loss = models.loss(spec, params, images, labels)
                    train_op = opt.minimize(loss, global_step=global_step)
                    worker_init = [v1.local_variables_initializer(), opt.get_init_op(self.index)]
                    chief_init = [v1.global_variables_initializer(), *worker_init]
        self.open(models.Built(graph, train_op, chief_init, worker_init, params, loss))
        return {"build_secs": time.monotonic() - started, "transport": None}


if __name__ == "__main__":
    models.serve(Worker)
