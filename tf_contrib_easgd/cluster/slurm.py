"""A Slurm job step as the cluster of a ps/worker job: no host list written by hand.

`srun -n 3 easgd-train ...` starts three tasks. Each reads the job step from the variables
slurmd gives it and works out the same cluster: tasks 0 to num_ps - 1 are the parameter
servers, the others the workers (task num_ps is the chief), and the task with local index i
on a node listens on port `port_base + i` of that node. docs/SLURM.md shows how to use it.
"""

# Why not `tf.distribute.cluster_resolver.SlurmClusterResolver` (TensorFlow 2.15-2.21), which
# reads the same variables (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST,
# SLURM_STEP_TASKS_PER_NODE; it needs no scontrol, it expands node lists itself) and can split
# a step into jobs ({"ps": 1, "worker": 2}: the ps first, as here):
# - It lists the nodes sorted by name, but Slurm numbers a step's tasks in the order of its
#   node list: on nodes n9 and n10 ("n[9-10]"), task 0 runs on n9 and the resolver gives it
#   n10's address. The job cannot start.
# - It hands every task GPUs: on a node without any, gpus_per_node=0 fails (a RuntimeError,
#   or a ValueError from a range of step 0), and its default runs nvidia-smi
#   (FileNotFoundError where there is none). It works there only by claiming a GPU per task
#   (gpus_per_node=tasks per node, auto_set_gpu=False); else it sets CUDA_VISIBLE_DEVICES.
# - It assumes the tasks are laid out in blocks, node by node, and does not check it: a step
#   run with --distribution=cyclic gets wrong addresses.
# - It imports TensorFlow, which easgd-train's flag checks do without.
# What is taken from it: the variables, the ps tasks first, and a port per task of a node
# counted from a base (its base is 8888 for every job; here it follows the job id, so that
# two jobs sharing a node rarely collide). tests/unit/test_cluster_resolver.py compares the two.

import os
import re

from tf_contrib_easgd.cluster.resolver import PS, WORKER, ClusterConfigError, ClusterTask

PROCID = "SLURM_PROCID"
NUM_TASKS = "SLURM_STEP_NUM_TASKS"
NODELIST = "SLURM_STEP_NODELIST"
TASKS_PER_NODE = "SLURM_STEP_TASKS_PER_NODE"
JOB_ID = "SLURM_JOB_ID"
#: Set by slurmd for each task: its node, and the tasks (global ranks) on that node.
NODENAME = "SLURMD_NODENAME"
GTIDS = "SLURM_GTIDS"
DISTRIBUTION = "SLURM_DISTRIBUTION"

#: The default port base of a job: PORT_FIRST + PORT_STRIDE * (job id % PORT_JOBS), one of
#: 20000, 20010, ..., 29990, below Linux's ephemeral ports (32768 and up).
PORT_FIRST = 20000
PORT_STRIDE = 10
PORT_JOBS = 1000

_HOSTLIST_PART = re.compile(r"([^\[\],]+)(?:\[([^\[\]]+)\])?|\[([^\[\]]+)\]")
_TASKS_PART = re.compile(r"(\d+)(?:\(x(\d+)\))?")


def default_port_base(job_id):
    """Returns the port of the first task of every node of job `job_id`."""
    return PORT_FIRST + PORT_STRIDE * (job_id % PORT_JOBS)


def expand_hostlist(value, name=NODELIST):
    """Expands a Slurm node list such as `"n[01-03,7],gpu1"` in its order, without scontrol.

    Each comma-separated part outside brackets is a name or a prefix with one bracketed
    list of numbers and ranges; a range keeps the width of its first number (`n[08-10]`:
    n08, n09, n10), as `scontrol show hostnames` expands it. Slurm writes such lists for
    its steps; names with several brackets (multi-dimensional systems) are refused.

    Raises:
        ClusterConfigError: naming `name` and `value`.
    """
    hosts = []
    for part in _split_outside_brackets(value, name):
        match = _HOSTLIST_PART.fullmatch(part)
        if match is None or match.group(3) is not None:
            raise _hostlist_error(value, name, f"cannot read {part!r}")
        prefix, ranges = match.group(1), match.group(2)
        if ranges is None:
            hosts.append(prefix)
            continue
        for item in ranges.split(","):
            low, dash, high = item.partition("-")
            high = high if dash else low
            if not (low.isdigit() and high.isdigit() and int(low) <= int(high)):
                raise _hostlist_error(value, name, f"{item!r} in {part!r} is no number or range")
            hosts.extend(prefix + str(i).zfill(len(low)) for i in range(int(low), int(high) + 1))
    return hosts


def _split_outside_brackets(value, name):
    """The comma-separated parts of `value`, commas inside brackets kept."""
    parts, start, depth = [], 0, 0
    for i, char in enumerate(value):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise _hostlist_error(value, name, "its brackets do not match")
        if char == "," and depth == 0:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    if depth:
        raise _hostlist_error(value, name, "its brackets do not match")
    if not all(parts):
        raise _hostlist_error(value, name, "a name is empty")
    return parts


def _hostlist_error(value, name, why):
    return ClusterConfigError(
        f"{name}={value!r}: {why}; expected a Slurm node list such as 'n[01-03,7],gpu1'."
    )


def expand_tasks_per_node(value, name=TASKS_PER_NODE):
    """Expands Slurm's tasks per node, e.g. `"2(x3),1"` to `[2, 2, 2, 1]`.

    Raises:
        ClusterConfigError: naming `name` and `value`.
    """
    counts = []
    for part in value.split(","):
        match = _TASKS_PART.fullmatch(part.strip())
        if match is None or int(match.group(1)) < 1 or match.group(2) == "0":
            raise ClusterConfigError(
                f"{name}={value!r}: cannot read {part!r}; expected task counts per node such "
                "as '2(x3),1' (2 tasks on each of 3 nodes, then 1)."
            )
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def cluster_from_slurm(
    num_ps=1, environ=None, port_base=None, *, num_ps_name="num_ps", port_base_name="port_base"
):
    """Describes this task of a Slurm job step as a task of a ps/worker cluster.

    Tasks (`SLURM_PROCID`) 0 to num_ps - 1 are ps 0 to num_ps - 1; task num_ps + i is worker
    i, so task num_ps is the chief. Addresses are `<node>:<port>` with the nodes' Slurm names
    (they must resolve to the nodes, as they do where node names are host names); the task
    with local index i on a node gets `port_base + i`. Slurm lays a step's tasks out node by
    node (`--distribution=block`, its default); this task checks its own node against that
    (`SLURMD_NODENAME`, `SLURM_GTIDS`) and refuses any other layout.

    Args:
        num_ps: how many of the step's tasks are parameter servers, in [1, tasks).
        environ: the environment (default `os.environ`).
        port_base: the port of the first task of each node; None: `default_port_base` of
            `SLURM_JOB_ID`.
        num_ps_name: the name of `num_ps` in messages (a flag, say).
        port_base_name: the name of `port_base` in messages.

    Returns:
        A `ClusterTask` with `source="Slurm"`.

    Raises:
        ClusterConfigError: naming the variable (or argument) and its value, when a variable
            is missing (not a task of a job step: start the tasks with srun) or malformed,
            the split leaves no worker, a port is out of range, or the layout is not blocks.
    """
    env = os.environ if environ is None else environ
    num_tasks = _int_variable(env, NUM_TASKS, 1)
    rank = _int_variable(env, PROCID, 0)
    if rank >= num_tasks:
        raise ClusterConfigError(
            f"{PROCID}={rank}: the step has {NUM_TASKS}={num_tasks} tasks, so it must be less."
        )
    nodes = expand_hostlist(_variable(env, NODELIST))
    counts = expand_tasks_per_node(_variable(env, TASKS_PER_NODE))
    layout = f"{NODELIST}={env[NODELIST]!r} and {TASKS_PER_NODE}={env[TASKS_PER_NODE]!r}"
    if len(nodes) != len(counts) or sum(counts) != num_tasks or len(set(nodes)) != len(nodes):
        raise ClusterConfigError(
            f"{layout} do not describe {NUM_TASKS}={num_tasks} tasks: {len(nodes)} distinct "
            f"node(s) expected to match {len(counts)} count(s) summing to {num_tasks}."
        )
    if isinstance(num_ps, bool) or not isinstance(num_ps, int) or not 1 <= num_ps < num_tasks:
        raise ClusterConfigError(
            f"{num_ps_name}={num_ps!r}: the step has {NUM_TASKS}={num_tasks} tasks, and a job "
            f"needs at least 1 ps and 1 worker, so it must be in [1, {num_tasks})."
        )
    port_base = _port_base(env, port_base, port_base_name, max(counts))
    addresses, first = [], {}
    for node, count in zip(nodes, counts, strict=True):
        first[node] = len(addresses)
        addresses += [f"{node}:{port_base + i}" for i in range(count)]
    node = next(n for n in reversed(nodes) if first[n] <= rank)
    _check_block_layout(env, node, range(first[node], first[node] + counts[nodes.index(node)]))
    job, index = (PS, rank) if rank < num_ps else (WORKER, rank - num_ps)
    origin = f"Slurm task {rank} on node {node}, port {port_base} + {rank - first[node]}"
    return ClusterTask(
        tuple(addresses[:num_ps]), tuple(addresses[num_ps:]), job, index, "Slurm", origin
    )


def _variable(env, name):
    value = env.get(name)
    if value is None or not value.strip():
        raise ClusterConfigError(
            f"{name} is not set: this process is not a task of a Slurm job step. Start the "
            "tasks with srun (in an sbatch script too: srun <program>)."
        )
    return value.strip()


def _int_variable(env, name, minimum):
    value = _variable(env, name)
    if not value.isdigit() or int(value) < minimum:
        raise ClusterConfigError(f"{name}={value!r}: expected an integer >= {minimum}.")
    return int(value)


def _port_base(env, port_base, name, tasks_on_a_node):
    """`port_base`, or the job's default; checked so that every task's port is valid."""
    if port_base is None:
        port_base = default_port_base(_int_variable(env, JOB_ID, 0))
    elif isinstance(port_base, bool) or not isinstance(port_base, int):
        raise ClusterConfigError(f"{name}={port_base!r}: expected an integer.")
    if not 1 <= port_base <= 65536 - tasks_on_a_node:
        raise ClusterConfigError(
            f"{name}={port_base}: a node runs up to {tasks_on_a_node} task(s) of the step, on "
            f"ports {port_base} to {port_base + tasks_on_a_node - 1}; ports are in [1, 65535]."
        )
    return port_base


def _check_block_layout(env, node, ranks):
    """Raises unless slurmd put this task on `node`, with the tasks `ranks` there."""
    hint = (
        "a ps/worker cluster from a Slurm step needs its tasks in blocks, node by node, as "
        "srun lays them out by default (--distribution=block)"
    )
    if env.get(DISTRIBUTION):
        hint += f"; this step has {DISTRIBUTION}={env[DISTRIBUTION]!r}"
    layout = f"{NODELIST}={env[NODELIST]!r}, {TASKS_PER_NODE}={env[TASKS_PER_NODE]!r}"
    name = env.get(NODENAME, "").strip()
    if name and name != node:
        raise ClusterConfigError(
            f"{NODENAME}={name!r}, but in blocks ({layout}) task {env[PROCID]} runs on "
            f"{node!r}: {hint}."
        )
    gtids = env.get(GTIDS, "").strip()
    if gtids:
        found = sorted(int(t) for t in gtids.split(",") if t.strip().isdigit())
        if found != list(ranks):
            raise ClusterConfigError(
                f"{GTIDS}={gtids!r}: the tasks on {node!r}, but in blocks ({layout}) they "
                f"would be {ranks.start} to {ranks.stop - 1}: {hint}."
            )
