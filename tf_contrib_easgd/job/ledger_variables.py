"""The variables of a job's account of its work, on ps 0 beside the centre, and their ops.

`LedgerVariables` holds each worker's local steps as the centre last saw them, the flag
with which the chief ends the job and the workers' acknowledgements of it. They are global
variables, so checkpoints hold them with the centre. `WorkLedger` (ledger.py) is the
protocol built on them; docs/DESIGN.md, "Work asked is work done", has it step by step.
"""

import tensorflow as tf

#: The variable scope of the ledger's variables, and so their names in checkpoints. It
#: keeps the name it had when only easgd-train kept a ledger: its model_dirs restore.
SCOPE = "easgd_train"


class LedgerVariables:
    """Variables on the first parameter server: local steps per worker, the end of the job.

    Every worker builds the same variables in its graph. They are global variables, so the
    chief initialises them with the centre, its checkpoints hold them, and a restore brings
    back the counts that go with the restored centre.

    - `local_steps[i]`: the local steps of worker i whose exchanges reached the centre.
    - `job_done`: set by the chief once the others have their steps.
    - `acknowledged[i]`: set by worker i when it has seen `job_done`, so the chief stops
      the parameter servers only after the others know the job is over.

    Each method takes a session, or anything with a session's `run`.
    """

    def __init__(self, num_workers, task_index, ps_device="/job:ps/task:0"):
        """Builds the variables and the ops of worker `task_index` in the default graph.

        Args:
            num_workers: the number of workers in the job.
            task_index: this worker's index among them.
            ps_device: where the variables live.
        """
        self._task_index = task_index
        with tf.compat.v1.device(ps_device), tf.compat.v1.variable_scope(SCOPE):
            self.local_steps = tf.compat.v1.get_variable(
                "local_steps", [num_workers], tf.int64, tf.zeros_initializer(), trainable=False
            )
            self.job_done = tf.compat.v1.get_variable(
                "job_done", [], tf.bool, tf.zeros_initializer(), trainable=False
            )
            self.acknowledged = tf.compat.v1.get_variable(
                "acknowledged", [num_workers], tf.bool, tf.zeros_initializer(), trainable=False
            )
            # What a finished worker polls for, as one small tensor made on ps 0: one
            # RecvTensor per poll rather than one per variable.
            self._end = tf.stack(
                [
                    self.local_steps[0],
                    tf.cast(self.job_done, tf.int64),
                    self.local_steps[task_index],
                ],
                name="end_of_job",
            )
        with tf.name_scope(f"{SCOPE}_ops"):
            self._steps = tf.compat.v1.placeholder(tf.int64, [], name="steps")
            self._record = tf.compat.v1.scatter_update(
                self.local_steps, [task_index], tf.reshape(self._steps, [1])
            ).op
            self._end_job = tf.compat.v1.assign(self.job_done, True).op
            self._acknowledge = tf.compat.v1.scatter_update(
                self.acknowledged, [task_index], [True]
            ).op
            self._clear_end = tf.group(
                tf.compat.v1.assign(self.job_done, False),
                tf.compat.v1.assign(self.acknowledged, tf.zeros([num_workers], tf.bool)),
                name="clear_end",
            )
            self._own_steps = tf.identity(self.local_steps[task_index], name="own_steps")
            self._read_steps = tf.identity(self.local_steps, name="all_steps")
            self._read = (
                self._read_steps,
                tf.identity(self.job_done, name="job_done"),
                tf.identity(self.acknowledged, name="acknowledged"),
            )

    def own_steps(self, session):
        """This worker's local steps as the ledger holds them."""
        return int(session.run(self._own_steps))

    def all_steps(self, session):
        """Every worker's local steps, a list indexed by task index."""
        return [int(steps) for steps in session.run(self._read_steps)]

    def record(self, session, steps):
        """Writes this worker's count of local steps."""
        session.run(self._record, {self._steps: steps})

    def end_job(self, session):
        """On the chief: says that the job is over."""
        session.run(self._end_job)

    def acknowledge(self, session):
        """On another worker: says that it has seen the end of the job."""
        session.run(self._acknowledge)

    def clear_end(self, session):
        """On the chief, once the others have seen the end: clears `job_done` and every
        acknowledgement, so that no checkpoint written later starts a re-run as ended."""
        session.run(self._clear_end)

    def end_state(self, session):
        """`(the chief's local steps, job_done, this worker's local steps)` in one small
        read, what a finished worker polls for."""
        chief_steps, done, own_steps = session.run(self._end)
        return int(chief_steps), bool(done), int(own_steps)

    def read(self, session):
        """The whole ledger in one call: `(local steps, job_done, acknowledged)`.

        `local steps` and `acknowledged` are lists indexed by task index.
        """
        steps, done, acknowledged = session.run(self._read)
        return [int(count) for count in steps], bool(done), [bool(value) for value in acknowledged]
