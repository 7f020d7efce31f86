"""What the task processes share (Python 3.7, TensorFlow 1.15 and 2.x): the models as
`get_variable`s plus a forward pass (which can take other values: the centre's), a built
graph, the worker task that runs it in a session, the ps task, and their main (`serve`).
"""

import argparse
import ctypes
import ctypes.util
import dataclasses
import json
import platform
import sys
import threading
import time

import numpy as np
import tensorflow as tf

from benchmarks.common.protocol import digest, reply, serve_commands

OPERATION_TIMEOUT_MS = 60000  # A blocked session.run fails instead of hanging.
#: TensorFlow's gRPC runtime may abort a step with "The same RunGraph (Worker) request was
#: received twice" (a retried call; it ended a pinned run at 4 min here): a step that
#: aborts so is run again, up to this many times.
ABORT_RETRIES = 3
v1 = tf.compat.v1


class FewestBytesFirst:
    """A `replica_device_setter` `ps_strategy`: each variable to the ps task that holds the
    fewest bytes so far (on a tie, the lowest index). Round-robin would alternate a model's
    weights and biases and put nearly every byte on ps 0; both sides of the contrib
    comparison place with this, so they spread alike. One per graph: it counts."""

    def __init__(self, num_tasks):
        if type(num_tasks) is not int or num_tasks < 1:
            raise ValueError(f"num_tasks must be an int >= 1, got {num_tasks!r}")
        self.loads = [0] * num_tasks

    def __call__(self, op):
        task = self.loads.index(min(self.loads))
        self.loads[task] += variable_bytes(op)
        return task


def variable_bytes(op):
    """The bytes of the variable `op` makes (its `shape` and `dtype`); 0 for an op without
    them or of an unknown shape."""
    try:
        shape, dtype = tf.TensorShape(op.get_attr("shape")), tf.as_dtype(op.get_attr("dtype"))
    except ValueError:
        return 0
    count = shape.num_elements()
    return count * dtype.size if count is not None else 0


def replica_setter(worker_device, cluster_spec):
    """`replica_device_setter` over `cluster_spec`'s ps tasks, `FewestBytesFirst`."""
    spread = FewestBytesFirst(cluster_spec.num_tasks("ps"))
    return v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster_spec, ps_strategy=spread
    )


def make_params(spec):
    """The variables of `spec` (a `protocol.ModelSpec`), in creation order: name -> var."""
    params = {}
    for name, shape in spec.shapes().items():
        he_normal = v1.initializers.he_normal(seed=len(params))
        initializer = v1.zeros_initializer() if name.endswith("biases") else he_normal
        params[name] = v1.get_variable(name, shape, initializer=initializer)
    return params


def logits(spec, params, images):
    """The forward pass of `spec` with parameter values `params` (name -> tensor)."""

    def value(name):
        param = params[name]
        return param.read_value() if isinstance(param, tf.Variable) else param

    layers = spec.layers
    if spec.kind == "mlp":
        net = tf.reshape(images, [-1, int(np.prod(spec.input_shape))])
        for i in range(len(layers) + 1):
            net = tf.matmul(net, value(f"layer_{i}/weights")) + value(f"layer_{i}/biases")
            net = tf.nn.relu(net) if i < len(layers) else net
        return net
    net = images
    for i in range(len(layers)):
        net = tf.nn.conv2d(net, value(f"conv_{i}/filters"), strides=1, padding="SAME")
        net = tf.nn.relu(net + value(f"conv_{i}/biases"))
        if i > 0:
            net = tf.nn.max_pool2d(net, ksize=2, strides=2, padding="VALID")
    net = tf.reduce_mean(net, axis=[1, 2])
    return tf.matmul(net, value("logits/weights")) + value("logits/biases")


def loss(spec, params, images, labels):
    """Mean softmax cross-entropy of `spec` on a batch."""
    net = logits(spec, params, images)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=net))


@dataclasses.dataclass
class Built:
    """A configuration's graph: its step, the init ops of worker 0 and of the others, the
    shared model's parameters (centre, ps variables or own), the loss, the sync or EASGD
    optimizer, whether the session shares the cluster's devices, and EASGD's exchange as
    an op of its own (graphs.build's `standalone_exchange`)."""

    graph: tf.Graph
    train_op: tf.Operation
    chief_init: list
    worker_init: list
    shared_params: dict
    loss: tf.Tensor
    sync_optimizer: object = None
    easgd_optimizer: object = None
    share_devices: bool = True
    exchange_op: tf.Tensor = None


def run_step(session, train_op, timeout_ms):
    """Runs `train_op` once within `timeout_ms`, again if TensorFlow aborts it as a RunGraph
    request received twice (`ABORT_RETRIES`)."""
    options = v1.RunOptions(timeout_in_ms=timeout_ms)
    for attempt in range(ABORT_RETRIES + 1):
        try:
            return session.run(train_op, options=options)
        except tf.errors.AbortedError as error:
            if attempt == ABORT_RETRIES or "received twice" not in error.message:
                raise
    return None


class SessionWorker:
    """A worker task: its server, and a session of the `Built` graph being measured."""

    def __init__(self, cluster, index):
        self.index, self.cluster_spec = index, tf.train.ClusterSpec(cluster)
        self.server = v1.train.Server(self.cluster_spec, "worker", index)
        self.session = self.built = self.batch = self.coordinator = None

    def open(self, built):
        """Opens the session of `built`, runs its init ops (`chief_init` on worker 0) and
        starts its queue runners (the sync chief's, the overlapped exchange's)."""
        self.built, share = built, built.share_devices
        config = v1.ConfigProto(
            device_filters=["/job:ps", f"/job:worker/task:{self.index}"],
            operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
            experimental=v1.ConfigProto.Experimental(share_cluster_devices_in_session=share),
        )
        self.session = v1.Session(self.server.target, graph=built.graph, config=config)
        for op in built.chief_init if self.index == 0 else built.worker_init:
            self.session.run(op)
        runners = built.graph.get_collection(v1.GraphKeys.QUEUE_RUNNERS)
        if built.sync_optimizer is not None and self.index == 0:
            runners.append(built.sync_optimizer.get_chief_queue_runner())
        if runners:
            self.coordinator, self.threads = tf.train.Coordinator(), []
            for runner in runners:  # Daemon threads, started.
                self.threads += runner.create_threads(self.session, self.coordinator, True, True)

    def _step(self, end=None):
        """One local step; True (a subclass may give up after a window's `end`)."""
        run_step(self.session, self.built.train_op, OPERATION_TIMEOUT_MS)
        return True

    def run(self, start_at, seconds):
        """Steps until wall time `start_at` (two at least), then counts the steps of the
        next `seconds`; `elapsed` ends at the last step counted."""
        warm, end = 0, start_at + seconds
        while time.time() < start_at or warm < 2:
            self._step()
            warm += 1
        steps, last = 0, start_at
        while self._step(end):
            now = time.time()
            if now > end:
                break
            steps, last = steps + 1, now
        return {"warm_steps": warm, "steps": steps, "steps_per_sec": steps / seconds,
                "elapsed": last - start_at}  # fmt: skip

    def fingerprint(self):
        """SHA-256 digests of the trainable variables (names, shapes, values) and of the
        batch, and the loss: the contrib section compares them across TensorFlow versions."""
        with self.built.graph.as_default():
            variables = v1.trainable_variables()
        values, (images, labels) = self.session.run(variables), self.batch
        return {
            "params": digest((v.op.name, value) for v, value in zip(variables, values)),
            "batch": digest((("images", images), ("labels", labels))),
            "variables": len(values),
            "loss": float(self.session.run(self.built.loss)),
        }

    def placement(self):
        """{"placement": {name: ps task index}} of the built graph's global variables that
        live on a ps task: the contrib section checks that both sides spread them alike."""
        with self.built.graph.as_default():
            variables = v1.global_variables()
        placed = {}
        for variable in variables:
            device = tf.DeviceSpec.from_string(variable.device)
            if device.job == "ps":
                placed[variable.op.name] = device.task
        return {"placement": placed}

    def close(self):
        """Stops the queue runners and closes the session."""
        if self.coordinator is not None:
            self.coordinator.request_stop()
        if self.session is not None:
            self.session.close()
        if self.coordinator is not None:
            self.coordinator.join(self.threads, stop_grace_period_secs=5, ignore_live_threads=True)
        self.session = self.built = self.batch = self.coordinator = None
        return {}

    def reset(self, containers):
        """Frees the state of `containers` on every task (once every worker has closed)."""
        self.close()
        v1.Session.reset(self.server.target, containers)
        return {}


class ParameterServer:
    """A ps task: its server serves; `trim_memory` hands glibc's free memory back."""

    def __init__(self, cluster, index):
        self.server = v1.train.Server(tf.train.ClusterSpec(cluster), "ps", index)

    def trim_memory(self):
        """`malloc_trim`: the resident set after it is what the process uses."""
        libc = ctypes.util.find_library("c")
        if libc:
            ctypes.CDLL(libc).malloc_trim(0)
        return {}

    def close(self):
        pass


def serve(worker_class):
    """Runs this process's task as its arguments say: a ps, or a `worker_class(cluster,
    *indices)`; either answers the driver's commands, each a method of it."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("ps", "worker"), default="worker")
    parser.add_argument("--index", default="0", help="Task index (a host's: several, 0,4,8).")
    parser.add_argument("--cluster", required=True, help="ClusterSpec as JSON.")
    parser.add_argument("--world", choices=("tf1", "tf2"), default="tf1", help="Variables.")
    args = parser.parse_args()
    if args.world == "tf1":
        v1.disable_v2_behavior()
    cluster, indices = json.loads(args.cluster), [int(i) for i in args.index.split(",")]
    task = (ParameterServer if args.role == "ps" else worker_class)(cluster, *indices)
    reply({"ok": True, "ready": args.role, "tensorflow": tf.__version__,
           "python": platform.python_version()})  # fmt: skip
    serve_commands(task, sys.stdin)
    if args.role == "ps":
        threading.Event().wait()  # Serves until the driver kills this process.
