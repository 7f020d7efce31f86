"""The parameter servers' end, and `TrainingCompletion`, the end of a job without a ledger.

A parameter server, which only serves, must be told when the job is over:
`serve_until_done` runs one until the chief puts a token in its shutdown queue
(`stop_parameter_servers`). `TrainingCompletion` is the earlier end of a job: done reports
in a queue on ps 0, no account that a checkpoint keeps. The library's end of a job is
`WorkLedger` (ledger.py). docs/DESIGN.md ("Starting and ending a job") has both.
"""

import dataclasses
import time

import tensorflow as tf

#: How long the chief waits for the other workers, by default.
DEFAULT_WAIT_SECS = 600.0
POLL_SECS = 0.1

_DONE_QUEUE = "tf_contrib_easgd_done"
_SHUTDOWN_QUEUE = "tf_contrib_easgd_shutdown_{}"


@dataclasses.dataclass(frozen=True)
class FinishedWorkers:
    """What the chief learnt while it waited for the other workers.

    Attributes:
        local_steps: `{task_index: local steps}` of the other workers: with
            `TrainingCompletion`, of each that reported done; with `WorkLedger`, of every
            one, as the ledger counts them (fewer than asked for a missing one).
        missing: task indices of the workers that did not finish in time, sorted.
    """

    local_steps: dict
    missing: list


class TrainingCompletion:
    """Ends a between-graph EASGD job in order, from done reports: the end without a ledger.

    Kept for the scripts written for it, and used by `ElasticAverageWorker`, whose loop
    tells it its steps only at the end. `WorkLedger` is the library's end of a job, what
    easgd-train and the migrated example use: it also keeps each worker's count of local
    steps with the centre, so that a parameter server restored from a checkpoint sends a
    worker back to its count, and the count goes on after a restart. `TrainingCompletion`
    does not: a report is a message, gone with the ps that held it. It adds no variable to
    the graph, so the checkpoints of a script that uses it stay as they were.

    Make it on every worker while building the graph (it adds a few queue ops on the
    parameter servers), then:

    1. each worker calls `finish(session, local_steps)` when it has trained: a non-chief
       reports that it is done; the chief waits until all the others have reported (at
       most `timeout_secs`, then warns and goes on), so that its final checkpoint, written
       when its `MonitoredTrainingSession` closes, or its export, holds their work;
    2. after its session is closed, the chief calls `stop_parameter_servers(master)`:
       each parameter server running `serve_until_done` returns. On the other workers the
       call does nothing, so one script serves every worker.
    """

    def __init__(self, cluster, is_chief, task_index, ps_job="ps"):
        """Builds the queue ops in the default graph.

        Args:
            cluster: the job's `tf.train.ClusterSpec`, or a dict it can be made from. Its
                workers are the tasks of the "worker" job and of the "chief" job, if any.
            is_chief: whether this worker is the chief.
            task_index: this worker's index in its job.
            ps_job: the name of the parameter servers' job.

        Raises:
            ValueError: if `cluster` has no `ps_job` tasks or no workers.
        """
        cluster = tf.train.ClusterSpec(cluster)
        num_ps = num_tasks(cluster, ps_job)
        workers = num_tasks(cluster, "worker") + num_tasks(cluster, "chief")
        if num_ps == 0:
            raise ValueError(f"cluster has no {ps_job!r} tasks: {cluster.as_dict()}")
        if workers == 0:
            raise ValueError(f"cluster has no 'worker' or 'chief' tasks: {cluster.as_dict()}")
        self._is_chief = bool(is_chief)
        self._task_index = int(task_index)
        self._ps_job = ps_job
        # The task indices of the workers the chief waits for.
        chief_is_a_worker = num_tasks(cluster, "chief") == 0
        self._others = [
            index
            for index in range(num_tasks(cluster, "worker"))
            if not (chief_is_a_worker and self._is_chief and index == self._task_index)
        ]
        with tf.name_scope("training_completion"):
            self._report = tf.compat.v1.placeholder(tf.int64, [2], name="report")
            self._count = tf.compat.v1.placeholder(tf.int32, [], name="count")
            with tf.compat.v1.device(f"/job:{ps_job}/task:0"):
                done = _done_queue()
                self._enqueue = done.enqueue(self._report)
                self._size = done.size()
                self._dequeue = done.dequeue_many(self._count)
            self._stop = stop_op(num_ps, ps_job)

    @property
    def is_chief(self):
        """Whether this is the chief's `TrainingCompletion`."""
        return self._is_chief

    @property
    def others(self):
        """The task indices of the workers the chief waits for, in the "worker" job."""
        return list(self._others)

    def finish(self, session, local_steps, timeout_secs=DEFAULT_WAIT_SECS):
        """Reports this worker done; on the chief, waits for the others first.

        Args:
            session: a session of this worker's graph: a `MonitoredSession` (its hooks are
                not run) or a `tf.compat.v1.Session`.
            local_steps: how many local steps this worker trained.
            timeout_secs: on the chief, how long to wait for the others.

        Returns:
            On the chief, a `FinishedWorkers`; elsewhere None.
        """
        raw = _raw_session(session)
        if not self._is_chief:
            raw.run(self._enqueue, {self._report: [self._task_index, int(local_steps)]})
            return None
        deadline = time.monotonic() + timeout_secs
        others = len(self._others)
        while raw.run(self._size) < others and time.monotonic() < deadline:
            time.sleep(POLL_SECS)
        count = min(int(raw.run(self._size)), others)
        reports = raw.run(self._dequeue, {self._count: count}) if count else []
        local = {int(index): int(steps) for index, steps in reports}
        missing = sorted(set(self._others) - set(local))
        if missing:
            tf.compat.v1.logging.warning(
                "Workers %s did not report done within %g s; the chief goes on without "
                "their last steps.",
                missing,
                timeout_secs,
            )
        return FinishedWorkers(local_steps=dict(sorted(local.items())), missing=missing)

    def stop_parameter_servers(self, master, config=None, timeout_secs=30.0):
        """On the chief, tells every parameter server that the job is done; else nothing.

        Call it after the chief's session is closed (its final checkpoint is written then).

        Args:
            master: the target of this worker's server (`server.target`).
            config: a `tf.compat.v1.ConfigProto`; by default one that reaches the
                parameter servers and this worker only.
            timeout_secs: the deadline of the call.

        Raises:
            tf.errors.DeadlineExceededError: if a server does not take the token in time.
        """
        if self._is_chief:
            run_stop(self._stop, master, self._ps_job, config, timeout_secs)


def run_stop(stop, master, ps_job, config=None, timeout_secs=30.0):
    """Runs a `stop_op` in a session of its own on `master`, which ends every parameter
    server's `serve_until_done` (what a chief's `stop_parameter_servers` does).

    Args:
        stop: the op `stop_op` made.
        master: the target of this worker's server (`server.target`).
        ps_job: the name of the parameter servers' job.
        config: a `tf.compat.v1.ConfigProto`; by default one that reaches the parameter
            servers and this worker only.
        timeout_secs: the deadline of the call.

    Raises:
        tf.errors.DeadlineExceededError: if a server does not take the token in time.
    """
    if config is None:
        config = tf.compat.v1.ConfigProto(device_filters=[f"/job:{ps_job}"])
    options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout_secs * 1000))
    with tf.compat.v1.Session(master, graph=stop.graph, config=config) as session:
        session.run(stop, options=options)


def serve_until_done(server):
    """Runs a parameter server until the chief calls `stop_parameter_servers`.

    Use it instead of `server.join()` (which never returns) on a parameter server task.

    Args:
        server: this task's started `tf.compat.v1.train.Server`.
    """
    server_def = server.server_def
    device = f"/job:{server_def.job_name}/task:{server_def.task_index}"
    graph = tf.Graph()
    with graph.as_default():  # The queue is on this task (`_shutdown_queue`), the dequeue by it.
        wait = _shutdown_queue(server_def.task_index, server_def.job_name).dequeue()
    config = tf.compat.v1.ConfigProto(device_filters=[device])
    with tf.compat.v1.Session(server.target, graph=graph, config=config) as session:
        session.run(wait)


def stop_parameter_servers(cluster, timeout_secs=30.0, ps_job="ps"):
    """Tells every parameter server of a job that it is done, from any process.

    For a job whose chief died before it could, or for tests.

    Args:
        cluster: the job's `tf.train.ClusterSpec`, or a dict it can be made from.
        timeout_secs: the deadline of the call.
        ps_job: the name of the parameter servers' job.

    Raises:
        tf.errors.DeadlineExceededError: if a server does not take the token in time.
    """
    cluster = tf.train.ClusterSpec(cluster)
    graph = tf.Graph()
    with graph.as_default():
        stop = stop_op(num_tasks(cluster, ps_job), ps_job)
    config = tf.compat.v1.ConfigProto(
        device_filters=[f"/job:{ps_job}"], operation_timeout_in_ms=int(timeout_secs * 1000)
    )
    target = f"grpc://{cluster.task_address(ps_job, 0)}"
    with tf.compat.v1.Session(target, graph=graph, config=config) as session:
        session.run(stop, options=tf.compat.v1.RunOptions(timeout_in_ms=int(timeout_secs * 1000)))


def stop_op(num_ps, ps_job="ps"):
    """Returns an op that puts a token into the shutdown queue of each parameter server."""
    stops = [_shutdown_queue(index, ps_job).enqueue(1) for index in range(num_ps)]
    return tf.group(*stops, name="stop_parameter_servers")


def _shutdown_queue(ps_index, ps_job):
    """The queue on a parameter server where the chief puts the token that ends the job."""
    with tf.compat.v1.device(f"/job:{ps_job}/task:{ps_index}"):
        return tf.queue.FIFOQueue(
            capacity=-1,
            dtypes=[tf.int32],
            shapes=[[]],
            shared_name=_SHUTDOWN_QUEUE.format(ps_index),
        )


def _done_queue():
    """The queue (on ps 0, by the caller's device) of `[task_index, local_steps]` reports."""
    return tf.queue.FIFOQueue(capacity=-1, dtypes=[tf.int64], shapes=[[2]], shared_name=_DONE_QUEUE)


def num_tasks(cluster, job):
    """The number of tasks of `job` in a `tf.train.ClusterSpec`, 0 if it has none."""
    return cluster.num_tasks(job) if job in cluster.jobs else 0


def _raw_session(session):
    """The `tf.compat.v1.Session` in a `MonitoredSession` (no hooks run), else `session`.

    A `MonitoredSession`'s `run_step_fn` hands its function the session inside it.
    """
    if hasattr(session, "run_step_fn"):
        return session.run_step_fn(lambda step_context: step_context.session)
    return session
