"""How a worker's exchanges reach the parameter servers: chosen once per session.

An exchange step calls, for each parameter server task holding centres, a function that
does that task's half of the exchange where the centres live (exchange.py). The call can go
two ways, and which one works depends on the session, not on the graph:

* `DIRECT`: a `StatefulPartitionedCall` on the worker of a function whose ops are placed on
  the ps task. The worker's function runtime splits it into a worker part and a ps part and
  moves the tensors between them with TensorFlow's Send/Recv (the RecvTensor RPC a ps
  partition of a session uses, which copies least). It needs the worker's session to know
  the ps devices: the session's `tf.compat.v1.ConfigProto` must have
  `share_cluster_devices_in_session=True`.
* `REMOTE_CALL`: a `RemoteCall` op (TensorFlow's remote function call). It works in every
  session, but carries the tensors as protobuf fields of the RunGraph messages, which
  copies them more often: on a 2.9 M parameter model an exchange costs about twice as much
  (BENCHMARKS.md).

The graph holds both, behind a worker-local Switch on whether a marker resource exists on
the worker: a scalar resource variable made with raw ops, under a name unique to the graph,
and never a `tf.Variable`, so variable collections and checkpoints stay exactly contrib's.
It does not exist at first (REMOTE_CALL).
`ElasticAverageOptimizer.choose_exchange_transport(session)` (which the optimizer's hook
runs after each session creation) runs a probe, a direct call that reads the clock of every
ps task, then creates the marker when the probe succeeds (DIRECT) and destroys it when it
fails.
"""

import uuid

import tensorflow as tf

#: The transport through TensorFlow's Send/Recv (needs `share_cluster_devices_in_session`).
DIRECT = "direct"
#: The transport through a `RemoteCall` op (works in every session).
REMOTE_CALL = "remote_call"
#: The transport when no centre lives on another task: nothing is called.
NONE = "none"

_ADVICE = (
    "set share_cluster_devices_in_session=True in the worker's tf.compat.v1.ConfigProto "
    "for cheaper exchanges"
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
        self._targets = []
        self._probe = None

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
        """Records the ps tasks an exchange calls (the probe reaches each of them)."""
        if self._probe is not None and set(targets) - set(self._targets):
            raise RuntimeError(
                "An exchange was built after the transport probe: build every train op "
                "before creating the session."
            )
        self._targets += [target for target in targets if target not in self._targets]

    def build(self):
        """Builds the probe (once); call it while the graph can still change."""
        if self._probe is None and self._targets:
            self._probe = self._build_probe()

    def choose(self, session):
        """Runs the probe in `session` and creates or destroys the marker accordingly.

        Args:
            session: a session of this worker's graph (raw or monitored).

        Returns:
            `DIRECT`, `REMOTE_CALL`, or `NONE` when no exchange calls another task.
        """
        if not self._targets:
            return NONE
        self.build()
        use_direct, use_remote_call = self._probe
        try:
            session.run(use_direct)
        except tf.errors.InvalidArgumentError:
            # The worker's function runtime cannot place ops on the ps ("Cannot assign a
            # device"): the session does not share the cluster's devices.
            session.run(use_remote_call)
            tf.compat.v1.logging.info(
                "ElasticAverageOptimizer: exchanges use RemoteCall; %s.", _ADVICE
            )
            return REMOTE_CALL
        tf.compat.v1.logging.info(
            "ElasticAverageOptimizer: exchanges call the parameter servers directly."
        )
        return DIRECT

    def _build_probe(self):
        """Returns (op creating the marker after a direct call to every target, op
        destroying it)."""
        targets = list(self._targets)

        def read_clocks():
            clocks = []
            for target in targets:
                with tf.compat.v1.device(target):
                    # Stateful: never folded away, so the call really runs on each ps task.
                    clocks.append(tf.timestamp())
            return clocks

        read_clocks.__name__ = "easgd_transport_probe"
        with tf.compat.v1.device(None):
            function = tf.function(
                read_clocks, autograph=False, experimental_attributes={"_noinline": True}
            ).get_concrete_function()
            function.add_to_graph(tf.compat.v1.get_default_graph())
        with (
            tf.compat.v1.name_scope("exchange_transport"),
            tf.compat.v1.device(self._worker_device),
        ):
            clocks = tf.raw_ops.StatefulPartitionedCall(
                args=[], Tout=[tf.float64] * len(targets), f=function, name="probe"
            )
            with tf.control_dependencies(clocks):
                use_direct = tf.raw_ops.AssignVariableOp(
                    resource=self._marker(), value=True, name="use_direct"
                )
            use_remote_call = tf.raw_ops.DestroyResourceOp(
                resource=self._marker(), ignore_lookup_error=True, name="use_remote_call"
            )
        return use_direct, use_remote_call
