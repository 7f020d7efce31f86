"""Which task holds which centres: an exchange calls each parameter server task once.

`group_by_task` sorts the centres, and the global step, into one `TaskGroup` per task that
the worker calls, and one for what it reaches without a call. docs/DESIGN.md ("The
exchange").
"""

import dataclasses

import tensorflow as tf

from tf_contrib_easgd.exchange.variable_address import is_addressable


@dataclasses.dataclass
class TaskGroup:
    """The centres (and maybe the global step) held by one task.

    Attributes:
        target: the task's device name, e.g. "/job:ps/replica:0/task:0"; None for the
            worker's own task or an unknown place (the plain path).
        entries: the `CenteredVariable`s whose global centre lives on the task.
        global_step: the global step if it lives on the task, else None.
    """

    target: str | None
    entries: list = dataclasses.field(default_factory=list)
    global_step: tf.Variable | None = None

    def variables(self):
        """Every variable the exchange of this group touches: each entry's worker copy,
        local centre and global centre, then the global step if any."""
        variables = [
            variable
            for entry in self.entries
            for variable in (entry.worker, entry.local_center, entry.global_center)
        ]
        if self.global_step is not None:
            variables.append(self.global_step)
        return variables


def group_by_task(centered, global_step, worker_device):
    """Groups the centres, and the global step, by the task to call for them.

    Args:
        centered: the `CenteredVariable`s to exchange.
        global_step: the global step, or None.
        worker_device: device string of this worker.

    Returns:
        (the `TaskGroup` the worker reaches without a call, the `TaskGroup`s of the other
        tasks in the order of their first centre, the global step's last).
    """
    worker = tf.DeviceSpec.from_string(worker_device or "")
    groups = {}
    for entry in centered:
        target = remote_target(entry.global_center, worker)
        groups.setdefault(target, TaskGroup(target)).entries.append(entry)
    if global_step is not None:
        target = remote_target(global_step, worker)
        groups.setdefault(target, TaskGroup(target)).global_step = global_step
    local = groups.pop(None, TaskGroup(None))
    return local, list(groups.values())


def remote_target(variable, worker):
    """The task to call for `variable`, or None when the worker reaches it without a call.

    Args:
        variable: a global centre or the global step.
        worker: the worker's `tf.DeviceSpec`.

    Returns:
        A device name such as "/job:ps/replica:0/task:1", or None if the variable has no
        job in its device, lives on the worker's own task, or is of a kind the remote
        function cannot address.
    """
    if not is_addressable(variable):
        return None
    spec = tf.DeviceSpec.from_string(variable.device or "")
    if spec.job is None:
        return None
    task = (spec.job, spec.replica or 0, spec.task or 0)
    if task == (worker.job, worker.replica or 0, worker.task or 0):
        return None
    return f"/job:{task[0]}/replica:{task[1]}/task:{task[2]}"
