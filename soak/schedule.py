"""The faults of a soak: what, on which task, for how long, and when, from a seed.

A schedule is a list of `Fault`s in the order they are injected, one at a time. Each one
waits until the slowest worker has done `at_fraction` of its steps, until the previous
fault has cost all it costs (every worker reports progress again) and `settle_secs` more;
so a fault's effect is measured on a job that is training normally, and spread over the
training whatever the machine's speed. The same seed gives the same schedule. With two
ps tasks, ps restarts alternate between them, so each is killed once a schedule has two.
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
#: The job's parameter servers: 1 (the soak's default) or 2.
MAX_PS = 2


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


def ps_names(ps):
    """`["ps 0", ...]`."""
    return [f"ps {index}" for index in range(ps)]


def check_ps(ps):
    """Raises `ValueError` naming `ps` unless it is 1 or 2 (an int, not a bool)."""
    if not isinstance(ps, int) or isinstance(ps, bool) or not 1 <= ps <= MAX_PS:
        raise ValueError(f"ps must be 1 or {MAX_PS} (parameter servers), got {ps!r}.")


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
    ps=1,
):
    """A seeded random schedule of `faults` faults on a job of `ps` ps and `workers` workers.

    The first faults are each kind once (`KILL_PS` once per ps), in a random order; the
    others are drawn by `WEIGHTS`. A kill hits a worker other than the chief
    (`KILL_WORKER`), the chief or a ps; a freeze or a cut any task. With 2 ps the ps
    restarts alternate between them, from one drawn at random, so that a schedule with two
    of them restarts each ps. The faults' fractions of the training are spread evenly over
    `[first, last]`, each at a random point of its share. With `ps=1` a seed gives the
    schedule it gave before there was a `ps` argument.

    Args:
        seed: the seed; the same one gives the same schedule.
        faults: how many faults, >= 1.
        workers: the job's workers, >= 2 (one of them besides the chief).
        first: the fraction of the steps at which the first fault may come.
        last: the fraction by which the last one comes.
        freeze_secs: the range of a freeze's length.
        cut_secs: the range of a cut's length.
        settle_secs: the range of the pause after a fault's cost before the next one.
        ps: the job's parameter servers, 1 or 2.

    Returns:
        A list of `Fault`s, in order.

    Raises:
        ValueError: if `faults` < 1, `workers` < 2, `ps` is not 1 or 2, or
            `0 <= first < last < 1` fails.
    """
    if faults < 1 or workers < 2:
        raise ValueError(f"need faults >= 1 and workers >= 2, got {faults} and {workers}.")
    check_ps(ps)
    if not 0 <= first < last < 1:
        raise ValueError(f"need 0 <= first < last < 1, got first={first}, last={last}.")
    rng = random.Random(seed)
    kinds = [*KINDS, *[KILL_PS] * (ps - 1)]
    rng.shuffle(kinds)
    kinds = kinds[:faults]
    names, weights = zip(*WEIGHTS.items(), strict=True)
    kinds += rng.choices(names, weights, k=faults - len(kinds))
    # With 1 ps no draw: the same seed gives the schedule of a job of 1 ps as before.
    next_ps = rng.randrange(ps) if ps > 1 else 0
    share = (last - first) / faults
    schedule = []
    for index, kind in enumerate(kinds):
        if kind == KILL_PS:
            target, duration = f"ps {next_ps}", 0.0
            next_ps = (next_ps + 1) % ps
        else:
            target, duration = _target_and_duration(rng, kind, workers, ps, freeze_secs, cut_secs)
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


def _target_and_duration(rng, kind, workers, ps, freeze_secs, cut_secs):
    """The target and duration of a fault of any kind but `KILL_PS`."""
    tasks = [*ps_names(ps), *worker_names(workers)]
    if kind == KILL_WORKER:
        return rng.choice(worker_names(workers)[1:]), 0.0
    if kind == KILL_CHIEF:
        return CHIEF, 0.0
    span = freeze_secs if kind == FREEZE else cut_secs
    return rng.choice(tasks), round(rng.uniform(*span), 1)


def check_schedule(schedule, workers, stall_report_secs, ps=1):
    """Checks that a schedule fits a job of `ps` ps and `workers` workers, and the soak can
    measure it.

    Raises:
        ValueError: naming the first fault that does not: a target that is not a task of
            the job, a kill whose kind does not match its target, fractions that do not
            grow, or a cut too short for a worker to see it (it must outlast
            `stall_report_secs` and the watch's probe, 2 s more, so that a step stuck
            once the link is back rejoins instead of waiting for TCP's backoff).
    """
    check_ps(ps)
    servers = set(ps_names(ps))
    tasks = {*servers, *worker_names(workers)}
    previous = -1.0
    for fault in schedule:
        where = f"fault {fault.index} ({fault.kind} {fault.target})"
        if fault.target not in tasks:
            raise ValueError(f"{where}: no such task in a job of {ps} ps and {workers} workers.")
        expected = {KILL_CHIEF: {CHIEF}, KILL_PS: servers, KILL_WORKER: tasks - servers - {CHIEF}}
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
