"""How a worker's exchanges reach the parameter servers: chosen once per session.

`ExchangeTransport` chooses between a direct call (through TensorFlow's Send/Recv, when the
session shares the cluster's devices) and a `RemoteCall` (in every session), records the
choice in a marker resource on the worker, and probes the ps only when it may go direct.
docs/DESIGN.md ("Transports").
"""

import uuid

import tensorflow as tf

from tf_contrib_easgd.exchange.graph_functions import define_function
from tf_contrib_easgd.job.recovery import is_recoverable_error

#: The transport through TensorFlow's Send/Recv (needs `share_cluster_devices_in_session`).
DIRECT = "direct"
#: The transport through a `RemoteCall` op (works in every session).
REMOTE_CALL = "remote_call"
#: The transport when no centre lives on another task: nothing is called.
NONE = "none"

_NOT_SHARED = (
    "the session's ConfigProto does not set share_cluster_devices_in_session; set it to "
    "True in the worker's tf.compat.v1.ConfigProto for cheaper exchanges"
)


class ExchangeTransport:
    """The choice between the two ways of calling the parameter servers, for one optimizer."""

    def __init__(self, worker_device):
        """Names the marker resource of this choice; creates nothing yet.

        Args:
            worker_device: device string of this worker.
        """
        self._worker_device = worker_device
        # Unique per graph built: two graphs in one worker server never share the choice.
        self._marker_name = f"easgd_exchange_direct_call_{uuid.uuid4().hex}"
        self._targets = {}  # Task device name -> the variable the probe asks about there.
        self._probe = None
        self._choice = None  # The last choice made, logged only when it changes.

    def is_direct(self):
        """Builds a scalar bool tensor on the worker: whether exchanges call directly."""
        with tf.compat.v1.device(self._worker_device):
            return tf.raw_ops.VarIsInitializedOp(resource=self._marker(), name="is_direct")

    def _marker(self):
        # Always in the default container, whatever `tf.compat.v1.container` scope is open:
        # the probe and the exchange may be built in different ones.
        with tf.compat.v1.container(""):
            return tf.raw_ops.VarHandleOp(
                dtype=tf.bool, shape=[], shared_name=self._marker_name, name="direct_call_marker"
            )

    def add_targets(self, targets):
        """Records the ps tasks an exchange calls; the probe reaches each of them.

        Args:
            targets: a dict from a task's device name to an object whose `is_initialized()`
                builds a scalar bool op answering whether a variable the exchange needs on
                that task is initialised there (a `variable_address.VariableAddress`).

        Raises:
            RuntimeError: if a new task comes after the probe was built.
        """
        if self._probe is not None and set(targets) - set(self._targets):
            raise RuntimeError(
                "An exchange was built after the transport probe: build every train op "
                "before creating the session."
            )
        for target, address in targets.items():
            self._targets.setdefault(target, address)

    def build(self):
        """Builds the probe (once); call it while the graph can still change."""
        if self._probe is None and self._targets:
            self._probe = self._build_probe()

    def choose(self, session):
        """Chooses the transport for `session` and creates or destroys the marker accordingly.

        A session whose `ConfigProto` does not share the cluster's devices gets REMOTE_CALL
        at once; otherwise the probe runs (docs/DESIGN.md, "Transports").

        Args:
            session: a `tf.compat.v1.Session` of this worker's graph (not a monitored
                session, whose hooks would run around the probe).

        Returns:
            `DIRECT`, `REMOTE_CALL`, or `NONE` when no exchange calls another task.

        Raises:
            TypeError: if `session` is not a `tf.compat.v1.Session` (e.g. a monitored one).
            RuntimeError: if the probe was not built and the graph is finalized.
            tf.errors.UnavailableError: if a ps task was lost during the probe (an
                `InternalError` that `is_recoverable_error` recognises, raised again as
                the error `MonitoredTrainingSession` recovers from).
            tf.errors.OpError: any other error of the probe but a placement error.
        """
        _check_session(session)
        if not self._targets:
            return NONE
        self._build_for(session)
        ask, use_direct, use_remote_call = self._probe
        choice, reason = REMOTE_CALL, _NOT_SHARED
        if shares_cluster_devices(session):
            choice, reason = self._run_probe(session, ask)
        session.run(use_direct if choice == DIRECT else use_remote_call)
        return self._chosen(choice, reason)

    def _build_for(self, session):
        """Builds the probe in the graph of `session` if it was not built yet."""
        if self._probe is not None:
            return
        if session.graph.finalized:
            raise RuntimeError(
                "The exchange transport probe was not built before the graph was "
                "finalized: call get_init_op (or make_session_run_hook) first."
            )
        with session.graph.as_default():
            self.build()

    @staticmethod
    def _run_probe(session, ask):
        """Runs the probe; returns (`DIRECT`, None) if every task said yes, else
        (`REMOTE_CALL`, why)."""
        try:
            answers = session.run(ask)
        except tf.errors.InvalidArgumentError as error:
            # The worker's function runtime cannot place ops on the ps ("Cannot assign a
            # device") although the session asked for the cluster's devices.
            return REMOTE_CALL, f"the probe could not reach the ps: {_placement_error(error)}"
        except tf.errors.InternalError as error:
            if is_recoverable_error(error):
                raise tf.errors.UnavailableError(error.node_def, error.op, error.message) from error
            raise
        if not all(answers):
            return REMOTE_CALL, "a parameter server does not hold the exchange's variables yet"
        return DIRECT, None

    def _chosen(self, choice, reason):
        """Records `choice` and logs it at INFO, with `reason`, unless it is the last one
        made again; returns it."""
        if choice != self._choice:
            if choice == DIRECT:
                tf.compat.v1.logging.info(
                    "ElasticAverageOptimizer: exchanges call the parameter servers directly."
                )
            else:
                tf.compat.v1.logging.info(
                    "ElasticAverageOptimizer: exchanges use RemoteCall: %s.", reason.rstrip(".")
                )
        self._choice = choice
        return choice

    def _build_probe(self):
        """Returns (the direct call asking every target, the op creating the marker, the op
        destroying it)."""
        targets = list(self._targets.items())

        def ask_every_task():
            answers = []
            for target, address in targets:
                with tf.compat.v1.device(target):
                    answers.append(address.is_initialized())
            return answers

        ask_every_task.__name__ = "easgd_transport_probe"
        function = define_function(ask_every_task, [], noinline=True)
        with (
            tf.compat.v1.name_scope("exchange_transport"),
            tf.compat.v1.device(self._worker_device),
        ):
            ask = tf.raw_ops.StatefulPartitionedCall(
                args=[], Tout=[tf.bool] * len(targets), f=function, name="probe"
            )
            use_direct = tf.raw_ops.AssignVariableOp(
                resource=self._marker(), value=True, name="use_direct"
            )
            use_remote_call = tf.raw_ops.DestroyResourceOp(
                resource=self._marker(), ignore_lookup_error=True, name="use_remote_call"
            )
        return ask, use_direct, use_remote_call


def shares_cluster_devices(session):
    """Whether `session` was created with a `ConfigProto` sharing the cluster's devices.

    That is `share_cluster_devices_in_session` or its older name
    `experimental.share_cluster_devices_in_session`, the two fields the master reads to give
    a session's workers the cluster's devices (what a direct call needs).

    Args:
        session: a `tf.compat.v1.Session`.

    Returns:
        True if the session's own `ConfigProto` sets either field; False otherwise, also for
        a session created without a `ConfigProto`.
    """
    # `tf.compat.v1.Session` keeps the ConfigProto it was created with in `_config` (as
    # every TensorFlow version from 1.x to 2.21 does) and offers no public accessor.
    config = getattr(session, "_config", None)
    if config is None:
        return False
    return bool(
        config.share_cluster_devices_in_session
        or config.experimental.share_cluster_devices_in_session
    )


def _check_session(session):
    """Raises TypeError unless `session` is a `tf.compat.v1.Session`."""
    if not isinstance(session, (tf.compat.v1.Session, tf.compat.v1.InteractiveSession)):
        raise TypeError(
            "session must be a tf.compat.v1.Session (in a hook: the session that "
            f"after_create_session receives), got {session!r} of type "
            f"{type(session).__name__}."
        )


def _placement_error(error):
    """The line of a probe's error that says why it could not be placed."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return next((line for line in lines if "assign a device" in line), lines[0] if lines else "")
