"""`WorkLedger`: the end of an EASGD job, with an account of the work that goes with the centre.

Each worker's count of local steps lives on ps 0 beside the centre, in the checkpoints with
it. A session takes its worker's step from there, so a restarted worker goes on from its
count and a parameter server restored from a checkpoint sends a worker back to the count
that goes with the restored centre; the chief ends the job when every count is complete.
easgd-train and a user's own loop end a job with it. docs/DESIGN.md, "Work asked is work
done", has the protocol.
"""

import contextlib
import numbers
import time

import numpy as np
import tensorflow as tf

from tf_contrib_easgd.job.completion import (
    DEFAULT_WAIT_SECS,
    FinishedWorkers,
    num_tasks,
    run_stop,
    stop_op,
)
from tf_contrib_easgd.job.ledger_variables import LedgerVariables

#: How often the chief reads the ledger on ps 0 while it waits, and a finished worker at
#: least.
POLL_SECS = 0.2
#: The most polls per second that the finished workers of a job make on ps 0 together:
#: with many workers each polls less often (`waiting_poll_secs`). One poll took ~0.7 ms
#: of ps 0's CPU with 64 workers polling (docs/SCALING.md); at 0.2 s each, 64 finished
#: workers took a fifth of a core from the stragglers' exchanges.
MAX_WAITING_POLLS_PER_SEC = 50.0
#: How long the chief waits for the finished workers to see the end of the job.
ACKNOWLEDGE_SECS = 30.0


def waiting_poll_secs(num_workers):
    """How often each finished worker of a `num_workers`-worker job polls for its end:
    `POLL_SECS`, or less often where their polls together would exceed
    `MAX_WAITING_POLLS_PER_SEC`."""
    return max(POLL_SECS, num_workers / MAX_WAITING_POLLS_PER_SEC)


class WorkLedger:
    """Ends a between-graph EASGD job when every worker has trained the steps asked of it.

    Make it on every worker while building the graph (it adds three small variables on
    ps 0, saved with the centre, and the ops that stop the parameter servers); give
    `hook` to the session; count each local step; then `finish`:

        ledger = WorkLedger(cluster, is_chief, task_index, train_steps, period)
        hooks = [easgd_hook, ledger.hook]
        with tf_contrib_easgd.MonitoredTrainingSession(..., hooks=hooks) as sess:
            while not sess.should_stop() and not ledger.finish(sess):
                sess.run(train_op)
                ledger.count(sess)
        ledger.stop_parameter_servers(server.target)

    * `hook`, after each session is created, takes `step` from the ledger: 0 in a new
      job, the count of a worker restarted, or the count a restored checkpoint holds;
    * `count` adds a local step and writes the count after each exchange (every
      `communication_period` steps of a session) and at the last step, so the ledger
      holds the work whose exchanges reached the centre;
    * `finish` returns False while this worker has steps to train. Then, on the chief, it
      waits until every other worker's count is complete (at most `timeout_secs`, then
      warns and goes on), calls `before_end`, sets `job_done`, waits until the others have
      seen it (`ACKNOWLEDGE_SECS` at most) and returns True; the chief's final checkpoint,
      written when its session closes, holds everyone's work. On another worker it waits
      for `job_done`, acknowledges it and returns True (or gives up, with a warning, when
      the chief's count has not moved for twice `timeout_secs`). Either returns False,
      back to training, when a new session or the ledger shows a lower count of its own: a
      parameter server was restored from a checkpoint;
    * `stop_parameter_servers`, after the chief's session is closed, ends each parameter
      server's `serve_until_done`; on the other workers it does nothing.

    Its calls to ps 0 run no hooks of the session. In a `MonitoredSession` they recover as
    its own runs do: a lost ps makes a new session, and `step` follows it.
    """

    def __init__(
        self, cluster, is_chief, task_index, train_steps, communication_period, ps_job="ps"
    ):
        """Checks the arguments, then builds the variables and ops in the default graph.

        Args:
            cluster: the job's `tf.train.ClusterSpec`, or a dict it can be made from. Its
                workers are the task of the "chief" job, if any, then those of the
                "worker" job; without a "chief" job, worker 0 is the chief.
            is_chief: whether this worker is the chief.
            task_index: this worker's index in its job.
            train_steps: the local steps asked of each worker, at least 1.
            communication_period: the optimizer's local steps between two exchanges.
            ps_job: the name of the parameter servers' job.

        Raises:
            TypeError: if `is_chief` is not a bool, or a count not an int.
            ValueError: if `cluster` has no `ps_job` tasks or no workers, `task_index` is
                not one of its workers, or a count is below 1.
        """
        self._is_chief = _check_bool(is_chief, "is_chief")
        self._train_steps = _check_count(train_steps, "train_steps", 1)
        self._period = _check_count(communication_period, "communication_period", 1)
        task_index = _check_count(task_index, "task_index", 0)
        cluster = tf.train.ClusterSpec(cluster)
        num_ps = num_tasks(cluster, ps_job)
        chiefs, workers = num_tasks(cluster, "chief"), num_tasks(cluster, "worker")
        if num_ps == 0:
            raise ValueError(f"cluster has no {ps_job!r} tasks: {cluster.as_dict()}")
        if chiefs + workers == 0:
            raise ValueError(f"cluster has no 'worker' or 'chief' tasks: {cluster.as_dict()}")
        in_job = chiefs if self._is_chief and chiefs else workers
        if task_index >= in_job:
            raise ValueError(
                f"task_index must be below the {in_job} task(s) of this worker's job in "
                f"{cluster.as_dict()}, got {task_index!r}"
            )
        # The ledger's slots: the "chief" task, then the "worker" tasks.
        self._slot = 0 if self._is_chief and chiefs else chiefs + task_index
        self._num_workers = chiefs + workers
        self._ps_job = ps_job
        self.variables = LedgerVariables(self._num_workers, self._slot, f"/job:{ps_job}/task:0")
        with tf.name_scope("work_ledger"):
            self._stop = stop_op(num_ps, ps_job)
        self.hook = _ResumeHook(self)
        self._step = 0
        self._session_start = 0  # `step` when the optimizer's count of steps began.
        self._raw = None  # The session inside the `MonitoredSession` in use.
        self.finished = None

    @property
    def is_chief(self):
        """Whether this is the chief's ledger."""
        return self._is_chief

    @property
    def others(self):
        """The ledger's slots of the workers the chief waits for: a worker's slot is its
        task index, or with a "chief" job, 1 + its task index (the chief's is 0). The keys
        of `finished.local_steps` and the numbers in the warnings are slots."""
        return [slot for slot in range(self._num_workers) if slot != self._slot]

    @property
    def train_steps(self):
        """The local steps asked of each worker."""
        return self._train_steps

    @property
    def step(self):
        """This worker's local steps: from the ledger at each new session, then counted."""
        return self._step

    def resume(self, session):
        """Takes `step` from the ledger; `hook` calls it after each session creation.

        Call it yourself after creating a plain `tf.compat.v1.Session`. Returns `step`.
        """
        self._raw = session
        self._step = self._session_start = self.variables.own_steps(session)
        return self._step

    def count(self, session, steps=1, record=False):
        """Adds `steps` local steps; writes the count after an exchange, at the last step,
        or with `record` (the chief, before a checkpoint of its own). Returns `step`."""
        self._step += steps
        exchanged = (self._step - self._session_start) % self._period == 0
        if exchanged or record or self._step == self._train_steps:
            self.record(session)
        return self._step

    def record(self, session):
        """Writes this worker's count of local steps to the ledger."""
        self.variables.record(self._runner(session), self._step)

    def finish(self, session, timeout_secs=DEFAULT_WAIT_SECS, *, before_end=None, watch=None,
               warn=None):  # fmt: skip
        """Ends the job once this worker has its steps (see the class docstring).

        Args:
            session: a session of this worker's graph: a `MonitoredSession` with `hook`, or
                a `tf.compat.v1.Session` given to `resume`.
            timeout_secs: on the chief, how long to wait for the others' counts; on
                another worker, half how long the chief's count may stay still.
            before_end: on the chief, a function of no arguments called once the others
                have their counts (or the wait timed out), before the job ends: where
                easgd-train writes its final checkpoint and export.
            watch: a function of `step` returning a context manager that each call to
                ps 0 runs in (easgd-train's watch of a stalled step); none by default.
            warn: a function that takes each warning's message; by default TensorFlow's
                log.

        Returns:
            True once the job is over; False while this worker has steps to train
            (again). On the chief, `finished` then holds the `FinishedWorkers`.
        """
        if self._step < self._train_steps:
            return False
        watch = watch or (lambda step: contextlib.nullcontext())
        warn = warn or tf.compat.v1.logging.warning
        if self._is_chief:
            return self._finish_as_chief(session, timeout_secs, before_end, watch, warn)
        return self._wait_for_end(session, timeout_secs, watch, warn)

    def stop_parameter_servers(self, master, config=None, timeout_secs=30.0):
        """On the chief, after its session is closed, ends every parameter server's
        `serve_until_done`; on the other workers, nothing (see
        `TrainingCompletion.stop_parameter_servers` for the arguments)."""
        if self._is_chief:
            run_stop(self._stop, master, self._ps_job, config, timeout_secs)

    def _finish_as_chief(self, session, timeout_secs, before_end, watch, warn):
        runner, others = self._runner(session), self.others
        deadline = time.monotonic() + timeout_secs
        while True:
            with watch(self._step):
                steps = self.variables.all_steps(runner)
            if self._sent_back(steps[self._slot]):
                return False
            missing = [slot for slot in others if steps[slot] < self._train_steps]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(POLL_SECS)
        if missing:
            warn(
                f"workers {missing} did not finish within {timeout_secs:g} s; exporting the "
                "centre as it is"
            )
        if before_end is not None:
            before_end()
        with watch(self._step):
            self.variables.end_job(runner)
        self._wait_for_acknowledgements(runner, [i for i in others if i not in missing], warn)
        with watch(self._step):
            self.variables.clear_end(runner)
        self.finished = FinishedWorkers({slot: steps[slot] for slot in others}, missing)
        return True

    def _wait_for_acknowledgements(self, runner, finished, warn):
        """Waits until the `finished` workers have seen the end (`ACKNOWLEDGE_SECS` at most)."""
        deadline = time.monotonic() + ACKNOWLEDGE_SECS
        while True:
            _, _, acknowledged = self.variables.read(runner)
            unaware = [slot for slot in finished if not acknowledged[slot]]
            if not unaware:
                return
            if time.monotonic() > deadline:
                warn(
                    f"workers {unaware} did not see the end of the job within "
                    f"{ACKNOWLEDGE_SECS:g} s; stopping the parameter servers"
                )
                return
            time.sleep(POLL_SECS)

    def _wait_for_end(self, session, timeout_secs, watch, warn):
        runner, patience = self._runner(session), 2 * timeout_secs
        poll_secs = waiting_poll_secs(self._num_workers)
        chief_steps, changed = None, time.monotonic()
        while True:
            with watch(self._step):
                chief_now, done, own = self.variables.end_state(runner)
            if self._sent_back(own):
                return False
            if done:
                with watch(self._step):
                    self.variables.acknowledge(runner)
                return True
            if chief_now != chief_steps:
                chief_steps, changed = chief_now, time.monotonic()
            elif time.monotonic() - changed > patience:
                warn(
                    f"the chief's steps stayed at {chief_steps} for {patience:g} s; leaving "
                    "the job, whose ledger holds this worker's steps"
                )
                return True
            time.sleep(poll_secs)

    def _sent_back(self, own):
        """Whether this worker has steps to train again: a new session took a lower `step`
        from the ledger, or the ledger holds fewer than `step` (a ps restored in place).
        The optimizer's count goes on in the same session, so its exchanges stay where
        `count` expects them."""
        if own < self._step:
            self._session_start -= self._step - own
            self._step = own
        return self._step < self._train_steps

    def _runner(self, session):
        return _Runner(self, session)


class _Runner:
    """Runs a ledger op in the session inside a `MonitoredSession`, without its hooks (a
    summary hook would add its ops, and their feeds, to a poll). An `AbortedError` or
    `UnavailableError` makes the `MonitoredSession` create a new session, whose `hook`
    takes the step from the ledger, and the op runs again there."""

    def __init__(self, ledger, session):
        self._ledger = ledger
        self._session = session

    def run(self, fetches, feed_dict=None):
        if not hasattr(self._session, "run_step_fn"):
            return self._session.run(fetches, feed_dict)
        if self._ledger._raw is None:
            raise RuntimeError(
                "WorkLedger: the MonitoredSession has not run the ledger's hook; add "
                "ledger.hook to its hooks."
            )

        def step_fn(step_context):
            # Not `step_context.session`: after a recovery it is still the lost session;
            # `hook` has the new one.
            del step_context
            return self._ledger._raw.run(fetches, feed_dict)

        return self._session.run_step_fn(step_fn)


class _ResumeHook(tf.compat.v1.train.SessionRunHook):
    """After each session creation, takes the worker's step from the ledger."""

    def __init__(self, ledger):
        self._ledger = ledger

    def after_create_session(self, session, coord):
        del coord  # Unused.
        self._ledger.resume(session)


def _check_bool(value, name):
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def _check_count(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return int(value)
