"""An easgd-train worker of `--api=keras`: the built-in model trained by Keras `model.fit`.

The worker trains eagerly with `tf_contrib_easgd.ElasticAverageCallback`, which starts it
from the centre, exchanges every `--communication_period` batches, survives a lost
parameter server and, on the chief, waits for the others, saves the centre and stops the
parameter servers. A callback of this module reports the same events as the TF1 worker
(`worker`), and the chief writes `summary.json`. docs/KERAS.md ("easgd-train --api=keras").
"""

import os
import time

import numpy as np
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageCallback
from tf_contrib_easgd.trainer import data, export, models, progress


def run_worker(task, config, reporter, started_at):
    """Trains worker `task.task_index` with `model.fit`; the chief also writes the summary.

    The arguments are `task.run`'s (`started_at` given, no `rejoin`).

    Returns:
        For the chief, the summary dict; otherwise None.

    Raises:
        TimeoutError: if a parameter server is not reachable, or the chief does not set
            up the centre, within `config.timeout_secs`.
        files.SaveError: if the chief cannot write the summary.
    """
    dataset = data.load(config.dataset)
    images, labels = dataset.shard(task.task_index, task.num_workers)
    tf.keras.utils.set_random_seed(config.seed)
    model = models.build_keras_model(
        config.model, dataset.image_shape, dataset.num_classes, config.seed
    )
    models.compile_keras_model(model, config.optimizer, config.learning_rate)
    easgd = ElasticAverageCallback(
        task,
        config.communication_period,
        config.moving_rate,
        config.model_dir,
        timeout_secs=config.timeout_secs,
        save_checkpoint_steps=config.save_checkpoint_steps,
        overlap=config.overlap,
        wire_dtype=config.wire_dtype,
    )
    reports = _Progress(task, config, reporter, easgd, dataset, started_at)
    if not task.is_chief:
        reporter.event("waiting", what="the chief to initialise the centre")
    batches = data.batches(
        images, labels, config.batch_size, seed=(config.seed, task.task_index, 0)
    )
    model.fit(
        batches,
        steps_per_epoch=config.steps,
        epochs=1,
        verbose=0,
        callbacks=[easgd, reports],
    )
    if not task.is_chief:
        return None
    summary = _job_summary(task, config, dataset, easgd, reports, started_at)
    reporter.event("summary", **summary)
    return summary


class _Progress(tf.keras.callbacks.Callback):
    """Reports "started", "progress", "centre" (the chief's evaluations) and "done"."""

    def __init__(self, task, config, reporter, easgd, dataset, started_at):
        super().__init__()
        self._task = task
        self._config = config
        self._reporter = reporter
        self._easgd = easgd
        self._dataset = dataset
        self._started_at = started_at
        self.train_secs = 0.0
        self._evaluator = None

    def on_train_begin(self, logs=None):
        # After the EASGD callback's start: the worker holds the centre.
        easgd = self._easgd
        self._reporter.event(
            "started",
            startup_secs=time.monotonic() - self._started_at,
            step=0,
            recoveries=easgd.recoveries,
            global_step=easgd.global_step,
            distance=easgd.elastic_distance(),
            centre=easgd.centre_found,
        )
        self._train_started = time.monotonic()
        self._window = progress.Window(0)

    def on_train_batch_end(self, batch, logs=None):
        self._window.losses.append(float((logs or {}).get("loss", np.nan)))
        step, config = self._easgd.local_steps, self._config
        last = step == config.steps
        if last:
            self.train_secs = time.monotonic() - self._train_started
        if step % config.log_every_steps == 0 or last:
            easgd = self._easgd
            self._window.report(
                self._reporter, step, config.steps, easgd.elastic_distance(), easgd.global_step
            )
        every = config.eval_every_steps
        if self._task.is_chief and ((every and step % every == 0) or last):
            result = self._evaluate_centre()
            self._reporter.event("centre", step=step, **result)

    def on_train_end(self, logs=None):
        # After the EASGD callback's end of the job (the chief waited for the others).
        steps = self._easgd.local_steps
        self._reporter.event(
            "done",
            steps=steps,
            recoveries=self._easgd.recoveries,
            secs=self.train_secs,
            steps_per_sec=steps / max(self.train_secs, 1e-9),
        )

    def _evaluate_centre(self):
        """The centre's test accuracy and loss, in a second model of the same shape."""
        if self._evaluator is None:
            self._evaluator = tf.keras.models.clone_model(self.model)
        self._evaluator.set_weights(self._easgd.centre_weights())
        return models.evaluate_keras(self._evaluator, self._dataset.x_test, self._dataset.y_test)


def _job_summary(task, config, dataset, easgd, reports, started_at):
    """Evaluates the saved centre as a plain Keras model and writes `summary.json`."""
    export_path = os.path.join(config.model_dir, "centre.keras")
    evaluation = models.evaluate_keras(
        tf.keras.models.load_model(export_path), dataset.x_test, dataset.y_test
    )
    finished = easgd.finished
    local_steps = {str(task.task_index): easgd.local_steps}
    local_steps.update({str(i): steps for i, steps in finished.local_steps.items()})
    return export.write_summary(
        task,
        config,
        dataset,
        evaluation,
        moving_rate=easgd.moving_rate,
        local_steps=local_steps,
        unfinished_workers=finished.missing,
        exchanges=easgd.global_step,
        chief_train_secs=reports.train_secs,
        chief_steps_per_sec=easgd.local_steps / max(reports.train_secs, 1e-9),
        chief_recoveries=easgd.recoveries,
        chief_secs=time.monotonic() - started_at,
        checkpoint=tf.train.latest_checkpoint(config.model_dir),
        export=export_path,
    )
