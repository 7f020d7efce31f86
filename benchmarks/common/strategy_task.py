"""One process of the strategies section: a task of PSS, MWMS or the EASGD callback.

    python -m benchmarks.common.strategy_task --contender=pss --role=chief --cluster=JSON ...

`pss`: `tf.distribute.ParameterServerStrategy` + `model.fit` (tf-keras): the ps and worker
tasks only serve; the chief is the coordinator, which trains and evaluates. `mwms`:
`tf.distribute.MultiWorkerMirroredStrategy` + `model.fit`, every worker trains, worker 0
evaluates. `callback`: `ElasticAverageCallback` on every worker, the ps serves the centre,
worker 0 evaluates the centre. A process that trains prints one `protocol.reply` line at its
end: its learning curve (the evaluating process) and its steps. The driver is strategies.py.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
STARTED = time.time()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.common import protocol  # noqa: E402
from tf_contrib_easgd.trainer import data, models  # noqa: E402

CONTENDERS = ("pss", "mwms", "callback")
ROLES = ("ps", "worker", "chief")
BATCH = 32  # Examples of a worker step, every contender's (easgd-train's --batch_size).
MOMENTUM_OPTIMIZER = "momentum"  # easgd-train's default: SGD with momentum 0.9.
WAIT_SECS = 300.0  # The callback's waits on another task.


def parse(argv=None):
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contender", choices=CONTENDERS, required=True)
    parser.add_argument("--role", choices=ROLES, required=True)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--cluster", type=json.loads, required=True, help="{job: [host:port]}")
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--seconds", type=float, default=30.0, help="Of training.")
    parser.add_argument("--eval_secs", type=float, default=1.0)
    parser.add_argument("--epoch_steps", type=int, default=96, help="PSS and MWMS epochs.")
    parser.add_argument("--steps_per_execution", type=int, default=1)
    parser.add_argument("--overlap", action="store_true")
    parser.add_argument("--wire_dtype", default=None)
    parser.add_argument("--moving_rate", type=float, default=None, help="The callback's.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("learning_rate", "seconds", "eval_secs", "epoch_steps", "steps_per_execution"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name} must be > 0, got {getattr(args, name)!r}")
    return args


class Curve:
    """(seconds since `start`, test accuracy, steps) of the evaluated model."""

    def __init__(self, model, digits):
        self._evaluator = model  # Built outside any strategy's scope: plain variables.
        self._images, self._labels = digits.x_test, digits.y_test
        self.start, self.points = None, []

    def evaluate(self, weights, steps):
        self._evaluator.set_weights(weights)
        logits = self._evaluator(self._images, training=False).numpy()
        accuracy = float(np.mean(logits.argmax(axis=1) == self._labels))
        self.points.append((time.time() - self.start, accuracy, int(steps)))


class EpochCurve(tf.keras.callbacks.Callback):
    """PSS's coordinator (epoch-level callbacks only): evaluates at each epoch's end and
    stops once `seconds` have passed since the training began."""

    def __init__(self, curve, seconds, epoch_steps):
        super().__init__()
        self._curve, self._seconds, self._epoch_steps = curve, seconds, epoch_steps

    def on_train_begin(self, logs=None):
        self._curve.start = time.time()

    def on_epoch_end(self, epoch, logs=None):
        self._curve.evaluate(self.model.get_weights(), (epoch + 1) * self._epoch_steps)
        if time.time() - self._curve.start >= self._seconds:
            self.model.stop_training = True


class BatchCurve(tf.keras.callbacks.Callback):
    """A worker's window: counts its batches, evaluates (with `curve`) every `eval_secs`
    and at the end, and stops after `seconds`: at once (`agree` None), or at the first
    epoch end at which `agree(over)` (a collective of every worker) says one is over."""

    def __init__(self, seconds, eval_secs, curve=None, weights=None, agree=None):
        super().__init__()
        self._seconds, self._eval_secs, self._curve = seconds, eval_secs, curve
        self._weights, self._agree, self.start, self.steps = weights, agree, None, 0

    def on_train_begin(self, logs=None):
        self.start, self._next = time.time(), time.time()
        if self._curve:
            self._curve.start = self.start
            self._curve.evaluate(self._weights(), 0)
            self._next += self._eval_secs

    def on_train_batch_end(self, batch, logs=None):
        self.steps, now = self.steps + 1, time.time()
        if self._curve and now >= self._next:
            self._next = now + self._eval_secs
            self._curve.evaluate(self._weights(), self.steps)
        if self._agree is None and now - self.start >= self._seconds:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if self._agree is not None and self._agree(time.time() - self.start >= self._seconds):
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        self.secs = time.time() - self.start
        if self._curve:  # The callback's end, which comes first, copied the centre in.
            self._curve.evaluate(self.model.get_weights(), self.steps)


def _train_set(digits, seed, index=None, count=1):
    """Batches of `BATCH` forever, shuffled by `seed` (None: a new order in each process):
    all of the training set, or shard `index` of `count` (easgd-train's shards)."""
    images, labels = digits.x_train, digits.y_train
    if index is not None:
        images, labels = digits.shard(index, count)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return dataset.shuffle(len(images), seed=seed).repeat()


def _model(args, digits):
    return models.build_keras_model(args.model, digits.image_shape, digits.num_classes, args.seed)


def _compile(model, args):
    model.compile(
        optimizer=models.make_keras_optimizer(MOMENTUM_OPTIMIZER, args.learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=args.steps_per_execution,
    )


def _serve(args, job):
    """A PSS ps or worker, or the callback's ps: serves until stopped."""
    spec = tf.train.ClusterSpec(args.cluster)
    server = tf.distribute.Server(spec, job_name=job, task_index=args.index, start=True)
    protocol.reply({"serving": True, "role": job, "index": args.index})
    if args.contender == "callback":
        from tf_contrib_easgd import serve_until_done  # noqa: PLC0415

        serve_until_done(server)  # Until the chief's end of fit stops it.
    else:
        server.join()  # PSS's servers never end: the driver kills them.


def pss_chief(args, digits):
    """PSS's coordinator, as its documentation sets it up: `fit` on a `DatasetCreator` of
    a repeated dataset, `steps_per_epoch`, epoch-level callbacks only."""
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(args.cluster), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    evaluator = _model(args, digits)  # After the strategy has connected to the cluster.
    with strategy.scope():
        model = _model(args, digits)
        _compile(model, args)

    def dataset_fn(input_context):
        # Every worker gets input pipeline 0 of 1 (no sharding by worker); a shuffle of
        # its own in each worker process (seed None) keeps their batches apart.
        del input_context
        return _train_set(digits, None).batch(BATCH).prefetch(2)

    curve = Curve(evaluator, digits)
    window = EpochCurve(curve, args.seconds, args.epoch_steps)
    creator = tf.keras.utils.experimental.DatasetCreator(dataset_fn)
    model.fit(creator, epochs=10**6, steps_per_epoch=args.epoch_steps, callbacks=[window],
              verbose=0)  # fmt: skip
    steps = curve.points[-1][2] if curve.points else 0
    secs = curve.points[-1][0] if curve.points else 0.0
    return {"curve": curve.points, "steps": steps, "secs": secs, "t0": curve.start}


def mwms_worker(args, digits):
    """An MWMS worker (TF_CONFIG from --cluster): `fit` on the global batch of every
    worker's `BATCH`, which the strategy shards by data; worker 0 evaluates."""
    num_workers = len(args.cluster["worker"])
    os.environ["TF_CONFIG"] = json.dumps(
        {"cluster": args.cluster, "task": {"type": "worker", "index": args.index}}
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # Before any other op.
    evaluator = _model(args, digits) if args.index == 0 else None
    with strategy.scope():
        model = _model(args, digits)
        _compile(model, args)

    def agree(over):  # Every worker stops at the same epoch end, or none does.
        value = strategy.run(lambda: tf.constant(1.0 if over else 0.0))
        return bool(strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None) > 0)

    dataset = _train_set(digits, args.seed).batch(BATCH * num_workers)
    curve = Curve(evaluator, digits) if evaluator is not None else None
    window = BatchCurve(args.seconds, args.eval_secs, curve, model.get_weights, agree)
    model.fit(dataset, epochs=10**6, steps_per_epoch=args.epoch_steps, callbacks=[window],
              verbose=0)  # fmt: skip
    return {"curve": curve.points if curve else [], "steps": window.steps, "secs": window.secs,
            "t0": window.start, "keras": _keras_name()}  # fmt: skip


def callback_worker(args, digits):
    """An `ElasticAverageCallback` worker on shard `index` (as easgd-train's Keras worker);
    worker 0 evaluates the centre."""
    from tf_contrib_easgd import ElasticAverageCallback, cluster_from_hosts  # noqa: PLC0415

    task = cluster_from_hosts("worker", args.index, args.cluster["ps"], args.cluster["worker"])
    server = tf.distribute.Server(task.cluster_spec(), "worker", args.index, start=True)
    tf.keras.utils.set_random_seed(args.seed)
    model = _model(args, digits)
    _compile(model, args)
    easgd = ElasticAverageCallback(
        task, server=server, timeout_secs=WAIT_SECS, overlap=args.overlap,
        wire_dtype=args.wire_dtype, moving_rate=args.moving_rate,
    )  # fmt: skip
    curve = Curve(_model(args, digits), digits) if args.index == 0 else None
    window = BatchCurve(args.seconds, args.eval_secs, curve, easgd.centre_weights)
    count = len(args.cluster["worker"])
    dataset = _train_set(digits, args.seed + args.index, args.index, count).batch(BATCH)
    # The EASGD callback first: it starts the worker from the centre before the window.
    model.fit(dataset, epochs=1, steps_per_epoch=10**8, callbacks=[easgd, window], verbose=0)
    return {"curve": curve.points if curve else [], "steps": window.steps, "secs": window.secs,
            "t0": window.start, "moving_rate": easgd.moving_rate,
            "period": easgd.communication_period, "keras": _keras_name()}  # fmt: skip


def _keras_name():
    return f"{tf.keras.__name__.split('.')[0]} {getattr(tf.keras, '__version__', '')}".strip()


def main(argv=None):
    args = parse(argv)
    if args.role == "ps" or (args.contender == "pss" and args.role == "worker"):
        return _serve(args, args.role)
    digits = data.load_digits()
    run = {"pss": pss_chief, "mwms": mwms_worker, "callback": callback_worker}[args.contender]
    answer = run(args, digits)
    protocol.reply(
        dict(
            answer,
            ok=True,
            role=args.role,
            index=args.index,
            started=STARTED,
            cpu_secs=time.process_time(),
        )
    )
    # TensorFlow's distributed runtime can block the interpreter's exit (PSS's coordinator
    # does here): the answer is out, so the process ends at once.
    os._exit(0)


if __name__ == "__main__":
    main()
