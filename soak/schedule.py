"""The faults of a soak: what, on which task, for how long, and when, from a seed.

A schedule is a list of `Fault`s in the order they are injected, one at a time. Each one
waits until the slowest worker has done `at_fraction` of its steps, until the previous
fault has cost all it costs (every worker reports progress again) and `settle_secs` more;
so a fault's effect is measured on a job that is training normally, and spread over the
training whatever the machine's speed. The same seed gives the same schedule.
"""

import dataclasses
import random

KILL_WORKER = "kill_restart_worker"
KILL_CHIEF = "kill_restart_chief"
KILL_PS = "kill_restart_ps"
FREEZE = "freeze"
CUT = "cut"
KINDS = (KILL_WORKER, KILL_CHIEF, KILL_PS, FREEZE, CUT)
#: The kinds that end a process with SIGKILL and start it again at once.
KILLS = (KILL_WORKER, KILL_CHIEF, KILL_PS)
#: How often each kind is drawn once every kind has been drawn once.
WEIGHTS = {KILL_WORKER: 2, KILL_CHIEF: 1.5, KILL_PS: 1.5, FREEZE: 2.5, CUT: 2.5}

PS = "ps 0"
CHIEF = "worker 0"


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault of a schedule.

    Attributes:
        index: its position in the schedule, from 0.
        kind: one of `KINDS`.
        target: the task it hits, e.g. `"worker 1"` or `"ps 0"` (a cut takes that task's
            host off the network).
        duration_secs: how long a freeze or a cut lasts; 0 for a kill and restart.
        at_fraction: injected once every worker has done this fraction of its steps.
        settle_secs: and at least this long after the previous fault's cost ended.
    """

    index: int
    kind: str
    target: str
    duration_secs: float = 0.0
    at_fraction: float = 0.0
    settle_secs: float = 2.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {self.kind!r}.")
        if (self.kind in KILLS) != (self.duration_secs == 0):
            raise ValueError(
                f"fault {self.index} ({self.kind}): duration_secs must be 0 for a kill and "
                f"> 0 for a freeze or a cut, got {self.duration_secs!r}."
            )
        if not 0 <= self.at_fraction < 1:
            raise ValueError(f"at_fraction must be in [0, 1), got {self.at_fraction!r}.")

    def to_dict(self):
        """The fault as a JSON-ready dict."""
        return dataclasses.asdict(self)


def worker_names(workers):
    """`["worker 0", ...]`."""
    return [f"worker {index}" for index in range(workers)]


def make_schedule(
    seed,
    faults,
    workers,
    *,
    first=0.05,
    last=0.85,
    freeze_secs=(3.0, 8.0),
    cut_secs=(6.0, 12.0),
    settle_secs=(1.0, 3.0),
):
    """A seeded random schedule of `faults` faults on a job of 1 ps and `workers` workers.

    The first `len(KINDS)` faults are each kind once, in a random order; the others are
    drawn by `WEIGHTS`. A kill hits a worker other than the chief (`KILL_WORKER`), the
    chief or the ps; a freeze or a cut any task. The faults' fractions of the training
    are spread evenly over `[first, last]`, each at a random point of its share.

    Args:
        seed: the seed; the same one gives the same schedule.
        faults: how many faults, >= 1.
        workers: the job's workers, >= 2 (one of them besides the chief).
        first: the fraction of the steps at which the first fault may come.
        last: the fraction by which the last one comes.
        freeze_secs: the range of a freeze's length.
        cut_secs: the range of a cut's length.
        settle_secs: the range of the pause after a fault's cost before the next one.

    Returns:
        A list of `Fault`s, in order.

    Raises:
        ValueError: if `faults` < 1, `workers` < 2 or `0 <= first < last < 1` fails.
    """
    if faults < 1 or workers < 2:
        raise ValueError(f"need faults >= 1 and workers >= 2, got {faults} and {workers}.")
    if not 0 <= first < last < 1:
        raise ValueError(f"need 0 <= first < last < 1, got first={first}, last={last}.")
    rng = random.Random(seed)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    kinds = kinds[:faults]
    names, weights = zip(*WEIGHTS.items(), strict=True)
    kinds += rng.choices(names, weights, k=faults - len(kinds))
    share = (last - first) / faults
    schedule = []
    for index, kind in enumerate(kinds):
        target, duration = _target_and_duration(rng, kind, workers, freeze_secs, cut_secs)
        schedule.append(
            Fault(
                index=index,
                kind=kind,
                target=target,
                duration_secs=duration,
                at_fraction=round(first + share * (index + rng.uniform(0.2, 0.8)), 4),
                settle_secs=round(rng.uniform(*settle_secs), 1),
            )
        )
    return schedule


def _target_and_duration(rng, kind, workers, freeze_secs, cut_secs):
    tasks = [PS, *worker_names(workers)]
    if kind == KILL_WORKER:
        return rng.choice(worker_names(workers)[1:]), 0.0
    if kind == KILL_CHIEF:
        return CHIEF, 0.0
    if kind == KILL_PS:
        return PS, 0.0
    span = freeze_secs if kind == FREEZE else cut_secs
    return rng.choice(tasks), round(rng.uniform(*span), 1)


def check_schedule(schedule, workers, stall_report_secs):
    """Checks that a schedule fits a job and the soak can measure it.

    Raises:
        ValueError: naming the first fault that does not: a target that is not a task of
            the job, a kill whose kind does not match its target, fractions that do not
            grow, or a cut too short for a worker to see it (it must outlast
            `stall_report_secs` and the watch's probe, 2 s more, so that a step stuck
            once the link is back rejoins instead of waiting for TCP's backoff).
    """
    tasks = {PS, *worker_names(workers)}
    previous = -1.0
    for fault in schedule:
        where = f"fault {fault.index} ({fault.kind} {fault.target})"
        if fault.target not in tasks:
            raise ValueError(f"{where}: no such task in a job of {workers} workers.")
        expected = {KILL_CHIEF: {CHIEF}, KILL_PS: {PS}, KILL_WORKER: tasks - {CHIEF, PS}}
        if fault.kind in expected and fault.target not in expected[fault.kind]:
            raise ValueError(f"{where}: that kind hits {sorted(expected[fault.kind])}.")
        if fault.at_fraction < previous:
            raise ValueError(f"{where}: at_fraction {fault.at_fraction} < the previous one's.")
        previous = fault.at_fraction
        if fault.kind == CUT and fault.duration_secs < stall_report_secs + 2:
            raise ValueError(
                f"{where}: a cut of {fault.duration_secs:g} s is too short for "
                f"--stall_report_secs={stall_report_secs:g}; make it >= "
                f"{stall_report_secs + 2:g} s."
            )
