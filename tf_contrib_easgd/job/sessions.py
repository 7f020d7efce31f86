"""Sessions for EASGD workers: start as soon as the centre is ready, keep a living centre.

`MonitoredTrainingSession` is TensorFlow's, with two changes for between-graph EASGD: a
non-chief worker starts the moment the chief has set up the centre (not up to 30 s later),
and the chief keeps a centre the parameter servers still hold instead of setting it back to
its latest checkpoint. The pieces are public for scripts that build their own sessions:
`CentreWaitingSessionCreator`, `CentreKeepingScaffold` and `wait_for_centre`.
docs/DESIGN.md ("Starting and ending a job") explains why each is needed.
"""

import inspect
import logging
import time

import tensorflow as tf

#: MonitoredTrainingSession's default for how long a worker waits for the chief.
DEFAULT_MAX_WAIT_SECS = 7200.0
#: Pause between two readiness checks of `wait_for_centre`.
POLL_SECS = 0.1
#: Longest wait for the answer to one readiness check; then the next check opens a new session.
POLL_DEADLINE_SECS = 10.0

_READY_COLLECTION = "tf_contrib_easgd_centre_ready"
_NO_ANSWER = "(no answer from the parameter servers)"

#: The start of the warning of TensorFlow's `StepCounterHook` when `global_step` did not
#: change during a step: with EASGD it counts exchanges, one every `communication_period`
#: local steps, by design.
_STILL_STEP_WARNING = "It seems that global step (tf.train.get_global_step) has not been"


def centre_readiness_tensor(graph=None):
    """Returns a string tensor naming the global variables not yet initialised.

    The tensor is empty once the chief has set up the centre (every global variable, which
    includes the centres and `global_step`). It is made once per graph and reused.

    Args:
        graph: the graph; the default graph when None.

    Raises:
        RuntimeError: if the graph is finalized and the tensor was not made before.
    """
    graph = graph or tf.compat.v1.get_default_graph()
    made = graph.get_collection(_READY_COLLECTION)
    if made:
        return made[0]
    if graph.finalized:
        raise RuntimeError(
            "The graph is finalized: call tf_contrib_easgd.centre_readiness_tensor() (or "
            "wait_for_centre) once before it is, e.g. right after building the model."
        )
    with graph.as_default(), tf.name_scope("centre_readiness"):
        uninitialised = tf.compat.v1.report_uninitialized_variables(tf.compat.v1.global_variables())
        # A plain tensor rather than TF's "should use" wrapper, which logs an error when
        # it is garbage-collected without being run.
        ready = tf.identity(uninitialised, name="uninitialised_global_variables")
    graph.add_to_collection(_READY_COLLECTION, ready)
    return ready


def wait_for_centre(master, config=None, timeout_secs=DEFAULT_MAX_WAIT_SECS, graph=None):
    """Blocks until the chief has initialised every global variable (the centre).

    For a plain `Session` loop on a non-chief worker: call it before creating the session
    that trains (a `MonitoredSession` uses `CentreWaitingSessionCreator` instead).

    Args:
        master: the target of this worker's server (`server.target`).
        config: the `tf.compat.v1.ConfigProto` of the worker's sessions (give it
            `device_filters`, or a session waits for every task of the cluster).
        timeout_secs: how long to wait for the chief.
        graph: the graph holding the variables; the default graph when None.

    Raises:
        TimeoutError: if a global variable is still uninitialised after `timeout_secs`,
            naming the first few.
    """
    graph = graph or tf.compat.v1.get_default_graph()
    _wait_until_empty(master, graph, centre_readiness_tensor(graph), config, timeout_secs)


def _wait_until_empty(master, graph, ready, config, timeout_secs):
    """Polls `ready` (names of uninitialised variables) until it is empty or time is up.

    Each poll may take at most `POLL_DEADLINE_SECS`, so that one unanswered request does
    not use up the whole wait; the next poll goes through a new session.
    """
    deadline = time.monotonic() + timeout_secs
    session = None
    answered = None  # What the last answered poll named: the last poll may have had no time.
    try:
        while True:
            if session is None:
                session = tf.compat.v1.Session(master, graph=graph, config=config)
            left = max(deadline - time.monotonic(), 0.001)
            options = tf.compat.v1.RunOptions(
                timeout_in_ms=int(min(left, POLL_DEADLINE_SECS) * 1000)
            )
            try:
                answered = uninitialised = session.run(ready, options=options)
            except tf.errors.DeadlineExceededError:
                uninitialised = None
                session.close()
                session = None
            if uninitialised is not None and len(uninitialised) == 0:
                return
            if time.monotonic() >= deadline:
                names = [_NO_ANSWER] if answered is None else answered
                names = [n.decode() if isinstance(n, bytes) else n for n in names]
                raise TimeoutError(
                    f"The chief did not initialise the centre within {timeout_secs:g} s; "
                    f"still uninitialised: {names[:5]}. Is the chief worker running, and "
                    "does it build the same variables (the same names) as this worker?"
                )
            time.sleep(POLL_SECS)
    finally:
        if session is not None:
            session.close()


class CentreWaitingSessionCreator(tf.compat.v1.train.SessionCreator):
    """A non-chief worker's session creator that starts as soon as the centre is ready.

    It makes sessions as `tf.compat.v1.train.WorkerSessionCreator` does, which
    `MonitoredTrainingSession` uses on a non-chief. That one checks whether the chief has
    initialised the variables and sleeps 30 s after each failed check: at start, and each
    time the `MonitoredSession` recovers from a lost parameter server. This one polls every
    0.1 s first, so the check it then leaves to `WorkerSessionCreator` succeeds.
    """

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=DEFAULT_MAX_WAIT_SECS):
        """Creates the session creator; arguments as `WorkerSessionCreator`'s.

        Args:
            scaffold: a `tf.compat.v1.train.Scaffold`, or None for a default one.
            master: the target of this worker's server.
            config: the `tf.compat.v1.ConfigProto` of the sessions.
            max_wait_secs: how long to wait for the chief, at start and after a recovery.
        """
        self._scaffold = scaffold or tf.compat.v1.train.Scaffold()
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs
        self._creator = tf.compat.v1.train.WorkerSessionCreator(
            scaffold=self._scaffold, master=master, config=config, max_wait_secs=max_wait_secs
        )

    def create_session(self):
        """Waits until the centre is initialised, then creates and returns the session."""
        self._scaffold.finalize()  # Makes `ready_for_local_init_op`; the creator needs it too.
        _wait_until_empty(
            self._master,
            tf.compat.v1.get_default_graph(),
            self._scaffold.ready_for_local_init_op,
            self._config,
            self._max_wait_secs,
        )
        return self._creator.create_session()


class CentreKeepingScaffold(tf.compat.v1.train.Scaffold):
    """A chief's `Scaffold` that keeps a centre the parameter servers still hold.

    A chief with a checkpoint directory restores its latest checkpoint each time it creates
    a session: when it starts, when it is restarted, and when its `MonitoredSession`
    recovers. With EASGD the parameter servers often still hold a centre newer than that
    checkpoint (only the chief died, or the error was passing), and restoring would throw
    the other workers' progress away. With this scaffold the chief looks first: if every
    global variable is initialised, the centre is kept as it is; if any is not (a new job, or
    a parameter server that was restarted and lost its part), all of them are restored from
    the latest checkpoint, so the centre is one consistent snapshot, or initialised when
    there is none. Arguments as `tf.compat.v1.train.Scaffold`'s, plus `on_centre_ready`.
    """

    #: What the scaffold did when the chief's session was created (`on_centre_ready`).
    KEPT, RESTORED, INITIALISED = "kept", "restored", "initialised"

    def __init__(self, *args, on_centre_ready=None, **kwargs):
        """Creates the scaffold.

        Args:
            *args: positional arguments of `tf.compat.v1.train.Scaffold`.
            on_centre_ready: if given, called as `on_centre_ready(session, how, checkpoint)`
                once the centre is set up in a new session: `how` is `KEPT`, `RESTORED`
                or `INITIALISED`, `checkpoint` the path restored from (else None).
            **kwargs: keyword arguments of `tf.compat.v1.train.Scaffold`
                (`copy_from_scaffold` copies another scaffold).
        """
        super().__init__(*args, **kwargs)
        self._on_centre_ready = on_centre_ready
        self._centre_ready = None
        self._keeping_saver = None

    def finalize(self):
        """Makes the readiness check, then what `Scaffold.finalize` makes; idempotent."""
        if self._centre_ready is None:
            self._centre_ready = centre_readiness_tensor()
        super().finalize()
        if self._keeping_saver is None:
            self._keeping_saver = _CentreKeepingSaver(self._saver, self)
        return self

    @property
    def saver(self):
        """The saver; after `finalize()`, one whose `restore` keeps a held centre."""
        return self._keeping_saver or self._saver

    @property
    def init_op(self):
        """None: `init_fn` runs the init op, only when the centre is not held."""
        return None

    @property
    def init_fn(self):
        """Keeps a held centre; otherwise runs the init op and the user's `init_fn`."""
        return self._initialise_unless_held

    def centre_is_held(self, session):
        """Whether every global variable is initialised on the parameter servers."""
        return len(session.run(self._centre_ready)) == 0

    def _initialise_unless_held(self, session):
        if self.centre_is_held(session):
            self.report(session, self.KEPT, None)
            return
        session.run(self._init_op, feed_dict=self._init_feed_dict)
        if self._init_fn is not None:
            self._init_fn(session)
        self.report(session, self.INITIALISED, None)

    def report(self, session, how, checkpoint):
        """Logs how the centre was set up and calls `on_centre_ready`, if given."""
        messages = {
            self.KEPT: "Kept the centre the parameter servers hold.",
            self.RESTORED: f"Restored the centre from {checkpoint}.",
            self.INITIALISED: "Initialised the centre.",
        }
        tf.compat.v1.logging.info(messages[how])
        if self._on_centre_ready is not None:
            self._on_centre_ready(session, how, checkpoint)


class _CentreKeepingSaver:
    """The scaffold's saver, except that `restore` keeps a centre the servers hold.

    Everything but `restore` (save, saver_def, last_checkpoints, ...) is the saver's own.
    """

    def __init__(self, saver, scaffold):
        self._saver = saver
        self._scaffold = scaffold

    def restore(self, sess, save_path):
        """Restores `save_path`, unless every global variable is initialised already."""
        if self._scaffold.centre_is_held(sess):
            self._scaffold.report(sess, self._scaffold.KEPT, None)
            return
        self._saver.restore(sess, save_path)
        self._scaffold.report(sess, self._scaffold.RESTORED, save_path)

    def __getattr__(self, name):
        return getattr(self._saver, name)


def MonitoredTrainingSession(  # noqa: N802 (TensorFlow's name, for a drop-in replacement)
    master="",
    is_chief=True,
    checkpoint_dir=None,
    scaffold=None,
    hooks=None,
    config=None,
    stop_grace_period_secs=120,
    max_wait_secs=DEFAULT_MAX_WAIT_SECS,
    **kwargs,
):
    """`tf.compat.v1.train.MonitoredTrainingSession` for EASGD workers, same arguments.

    The chief's session is TensorFlow's, with a `CentreKeepingScaffold` copied from
    `scaffold`: it keeps a centre the parameter servers hold rather than restoring the
    latest checkpoint over it. A non-chief's session is TensorFlow's too (a
    `MonitoredSession` with `hooks`, as there), made by a `CentreWaitingSessionCreator`: it
    starts as soon as the chief has set up the centre.

    Args:
        master: the target of this worker's server.
        is_chief: whether this worker is the chief.
        checkpoint_dir: where the chief saves and restores checkpoints.
        scaffold: a `tf.compat.v1.train.Scaffold`, or None.
        hooks: `SessionRunHook`s of every worker (the EASGD hook among them).
        config: the `tf.compat.v1.ConfigProto` of the sessions.
        stop_grace_period_secs: as in TensorFlow's.
        max_wait_secs: how long a non-chief waits for the chief.
        **kwargs: TensorFlow's other arguments (`chief_only_hooks`, `save_checkpoint_steps`,
            `save_summaries_steps`, ...), which matter to the chief only, as there.

    Returns:
        A `tf.compat.v1.train.MonitoredSession`.

    Raises:
        TypeError: for an argument TensorFlow's `MonitoredTrainingSession` does not take.
    """
    tf_function = tf.compat.v1.train.MonitoredTrainingSession
    inspect.signature(tf_function).bind(**kwargs)  # A wrong name fails as it would there.
    if is_chief:
        _quiet_still_global_step_warning()
        if not isinstance(scaffold, CentreKeepingScaffold):
            scaffold = CentreKeepingScaffold(copy_from_scaffold=scaffold)
        return tf_function(
            master=master,
            is_chief=True,
            checkpoint_dir=checkpoint_dir,
            scaffold=scaffold,
            hooks=hooks,
            config=config,
            stop_grace_period_secs=stop_grace_period_secs,
            max_wait_secs=max_wait_secs,
            **kwargs,
        )
    creator = CentreWaitingSessionCreator(
        scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs
    )
    return tf.compat.v1.train.MonitoredSession(
        session_creator=creator,
        hooks=hooks or [],
        stop_grace_period_secs=stop_grace_period_secs,
    )


class _StillGlobalStepFilter(logging.Filter):
    """Drops `StepCounterHook`'s warning that `global_step` did not change in a step."""

    def filter(self, record):
        return not record.getMessage().startswith(_STILL_STEP_WARNING)


def _quiet_still_global_step_warning():
    """Installs `_StillGlobalStepFilter` on TensorFlow's logger, once.

    The chief's `MonitoredTrainingSession` counts steps per second with a
    `StepCounterHook`, which warns (five times) when a step leaves `global_step` as it was.
    TensorFlow's own comment there names optimizers that do so by design; EASGD is one.
    """
    logger = tf.get_logger()
    if not any(isinstance(f, _StillGlobalStepFilter) for f in logger.filters):
        logger.addFilter(_StillGlobalStepFilter())
