"""A cost model of a ps/worker cluster: exchanges per second, their latency, a local step.

A worker's cycle is tau local steps of compute c, then an exchange of `wire_bytes` each way
split over the P ps tasks, all called at once: it ends with the slowest task, not after the
sum of them (`Costs`: CPU per call and per byte on each side, the links' efficiency and how
crowding slows links and ps cores; `Cluster`: where the tasks run, and whether the calls go
one after the other, as before issue 38). The cluster is solved as a closed queueing
network by approximate mean value analysis (`_mva`); docs/SCALING.md describes the model
and checks it against the scale harness, BENCHMARKS.md section 6 uses it.
"""

import dataclasses
import math
import re
import typing

import numpy as np

_EASGD = re.compile(r"^easgd-(\d+)(?:-alpha[0-9.a-z]+)?(?:-rho[0-9.a-z]+)?(-overlap)?(-bf16)?$")
E_GRID = np.linspace(0.3, 1.0, 141)
_ITERATIONS = 500


@dataclasses.dataclass(frozen=True)
class Costs:
    """What an exchange costs besides its wait; seconds (per call, per byte, per step).

    `link_efficiency` is the share of a link's rate one transfer alone gets. Crowding: each
    other transfer in flight on the links of the same network host makes a transfer
    `link_crowding` times slower (1 + k n), and each other exchange a ps core serves at
    once makes its CPU for one `ps_crowding` times dearer.
    """

    worker_call_secs: float = 0.0
    worker_byte_secs: float = 0.0
    ps_call_secs: float = 0.0
    ps_byte_secs: float = 0.0
    worker_step_secs: float = 0.0
    link_efficiency: float = 1.0
    link_crowding: float = 0.0
    ps_crowding: float = 0.0

    def worker_secs(self, wire_bytes, ps_tasks):
        """A worker's CPU for one exchange: a call per ps task, and every byte both ways."""
        return ps_tasks * self.worker_call_secs + 2 * wire_bytes * self.worker_byte_secs

    def ps_secs(self, wire_bytes, ps_tasks):
        """One ps task's CPU for one exchange: its call, and its share of the bytes."""
        return self.ps_call_secs + 2 * wire_bytes / ps_tasks * self.ps_byte_secs


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Where the tasks run.

    Attributes:
        rate_bits: line rate of the ps links (bits/s); None: not a limit (as loopback).
        workers: W.
        ps_tasks: P.
        ps_cores: the cores of each ps task, on a machine of its own.
        ps_pool_cores: if set, the cores all the ps tasks share instead.
        worker_pool_cores: if set, the cores the workers' exchanges (and step overheads)
            share; else each worker has its own.
        shared_cores: if set, every task and the workers' compute share these cores.
        one_network_host: every ps link is forwarded by one machine (an emulated network):
            a transfer crowds them all, not only its own ps task's link.
        serial_calls: an exchange calls the ps tasks one after the other (the exchange
            before issue 38, which the scale harness still measures), not all at once.
        late_replies: a task's replies leave after its updates, so that a link carries
            the values out, then the centres back (the exchange before issue 38); else
            both ways at once.
    """

    rate_bits: float | None
    workers: int
    ps_tasks: int = 1
    ps_cores: float = 1.0
    ps_pool_cores: float | None = None
    worker_pool_cores: float | None = None
    shared_cores: float | None = None
    one_network_host: bool = False
    serial_calls: bool = False
    late_replies: bool = False


@dataclasses.dataclass(frozen=True)
class Prediction:
    """Exchanges/s served, one exchange's mean latency, a worker's steps/s, and how busy
    the ps tasks' CPU is (cores) and each ps link is (share of its rate, each way)."""

    exchanges_per_sec: float
    latency_secs: float
    steps_per_sec: float
    ps_cores_busy: float
    link_busy: float


class _Station(typing.NamedTuple):
    """Where a worker's cycle spends time (`_stations`)."""

    compute: float  # Its compute there (only the cores every task shares hold any).
    exchange: float  # The exchange's time there.
    servers: float  # Cores (or links) serving it.
    crowd: tuple | None  # Whose queues slow it: ("ps", i) a ps core, ("link", i) the
    # links of a network host, or None.
    task: int | None  # The ps task whose call it serves, or None (every call's).


def _stations(cluster, costs, wire_bytes, period, compute_secs):
    """(think time, the `_Station`s of one worker's cycle of tau steps and an exchange).
    Only the cores every task shares hold compute; elsewhere it is think time."""
    p, w = cluster.ps_tasks, costs.worker_secs(wire_bytes, cluster.ps_tasks)
    w += period * costs.worker_step_secs
    ps = costs.ps_secs(wire_bytes, p)
    think, stations = period * compute_secs, []
    if cluster.shared_cores:
        stations.append(_Station(think, w + p * ps, cluster.shared_cores, None, None))
        think = 0.0
    else:
        if cluster.worker_pool_cores:
            stations.append(_Station(0.0, w, cluster.worker_pool_cores, None, None))
        else:
            think += w
        if cluster.ps_pool_cores:
            stations.append(_Station(0.0, p * ps, cluster.ps_pool_cores, ("ps", 0), None))
        else:
            stations += [_Station(0.0, ps, cluster.ps_cores, ("ps", i), i) for i in range(p)]
    if cluster.rate_bits:
        way = wire_bytes / p / (costs.link_efficiency * cluster.rate_bits / 8)
        for i in range(p):  # Each ps link, in and out.
            host = ("link", 0 if cluster.one_network_host else i)
            stations += [_Station(0.0, way, 1.0, host, i)] * 2
    return think, stations


def _exchange_secs(times, cluster):
    """An exchange's time from each station's (exchange time, is a link, task): its CPU
    and link times overlap (bytes are copied as they travel). Called one after the other,
    the tasks add up; all at once, the slowest task's CPU (after the CPU every call shares)
    and the slowest link count. A link's two ways add up with late replies; else the
    longer counts."""
    shared = sum(x for x, link, task in times if not link and task is None)
    tasks = {task for _, _, task in times if task is not None}
    cpu = [sum(x for x, link, t in times if not link and t == task) for task in tasks] or [0.0]
    ways = [[x for x, link, t in times if link and t == task] for task in tasks]
    combine = sum if cluster.late_replies else _longest
    wire = [combine(way) for way in ways] or [0.0]
    if cluster.serial_calls:
        return max(shared + sum(cpu), sum(wire))
    return max(shared + max(cpu), *wire)


def _longest(values):
    return max(values, default=0.0)


def _kind(where):
    """The kind of a station's crowd (`_stations`): "ps", "link", or None."""
    return where and where[0]


def _crowding(costs, stations, seen):
    """Each station's slowdown from the others' customers its crowd holds (`seen`)."""
    rates = {"ps": costs.ps_crowding, "link": costs.link_crowding}
    held = {}
    for station, queue in zip(stations, seen, strict=True):
        held[station.crowd] = held.get(station.crowd, 0.0) + queue
    return [1 + rates[_kind(s.crowd)] * held[s.crowd] if s.crowd else 1.0 for s in stations]


def _mva(workers, think, stations, costs, cluster):
    """(Cycle time, each station's crowding slowdown) of `workers` customers by approximate
    mean value analysis (Schweitzer's fixed point: another customer finds (W - 1) / W of a
    station's mean queue q). A station of m >= 1 cores keeps a customer D (1 + max(0, q' -
    m + 1) / m), exact when nobody waits and at saturation; less than a core is one slower
    core (D / m). The exchange's time is `_exchange_secs` of the stations' times (calls
    at once: a customer is at every task's stations together, and with replies at once at
    both ways of a link, each station's queue still W times its time over the cycle);
    compute overlaps none. Crowding scales D by `_crowding` (then the fixed point is
    damped: it would swing)."""
    slow = [s._replace(compute=s.compute / s.servers, exchange=s.exchange / s.servers,
                       servers=1.0) if s.servers < 1 else s for s in stations]  # fmt: skip
    lengths = [workers / len(slow)] * len(slow) if slow else []
    shrink = (workers - 1) / workers
    cycle = (
        think
        + sum(s.compute for s in slow)
        + _exchange_secs([(s.exchange, _kind(s.crowd) == "link", s.task) for s in slow], cluster)
    )
    damp = 0.5 if costs.link_crowding or costs.ps_crowding else 0.0
    crowd = [1.0] * len(slow)
    for _ in range(_ITERATIONS):
        seen = [q * shrink for q in lengths]
        crowd = _crowding(costs, slow, seen)
        stretch = [1 + max(0.0, q - s.servers + 1) / s.servers
                   for s, q in zip(slow, seen, strict=True)]  # fmt: skip
        compute = [s.compute * f for s, f in zip(slow, stretch, strict=True)]
        times = [(s.exchange * g * f, _kind(s.crowd) == "link", s.task)
                 for s, f, g in zip(slow, stretch, crowd, strict=True)]  # fmt: skip
        previous = cycle
        cycle = damp * cycle + (1 - damp) * (think + sum(compute) + _exchange_secs(times, cluster))
        lengths = [workers * (c + x) / cycle for c, (x, _, _) in zip(compute, times, strict=True)]
        if abs(cycle - previous) <= 1e-9 * cycle:
            break
    # None busier than 1.
    busiest = max(((s.compute + s.exchange * g) / s.servers
                   for s, g in zip(slow, crowd, strict=True)), default=0.0)  # fmt: skip
    return max(cycle, busiest * workers), crowd


def predict(cluster, costs, wire_bytes, period, compute_secs, overlap=False):
    """The `Prediction` for `cluster` and `costs`: workers exchanging `wire_bytes` each way
    every `period` steps of `compute_secs`; an `overlap`ped exchange runs beside the next
    steps (only the bounds apply)."""
    think, stations = _stations(cluster, costs, wire_bytes, period, compute_secs)
    workers = cluster.workers
    if overlap:
        own = period * compute_secs + costs.worker_secs(wire_bytes, cluster.ps_tasks)
        busiest = max(((s.compute + s.exchange) / s.servers for s in stations), default=0.0)
        cycle, crowd = max(own, busiest * workers), [1.0] * len(stations)
    else:
        cycle, crowd = _mva(workers, think, stations, costs, cluster)
    ps_crowd = [g for s, g in zip(stations, crowd, strict=True) if _kind(s.crowd) == "ps"]
    rate = workers / cycle
    ps_busy = rate * cluster.ps_tasks * costs.ps_secs(wire_bytes, cluster.ps_tasks)
    ps_busy *= sum(ps_crowd) / len(ps_crowd) if ps_crowd else 1.0
    link = 0.0
    if cluster.rate_bits:
        link = rate * wire_bytes / cluster.ps_tasks / (cluster.rate_bits / 8)
    return Prediction(rate, cycle - period * compute_secs, period / cycle, ps_busy, link)


def config_exchange(config, model_bytes):
    """(wire bytes, period, overlap) of a configuration of BENCHMARKS.md; async SGD moves
    the model each way every step, as `easgd-1` does."""
    if config == "async":
        return model_bytes, 1, False
    match = _EASGD.match(config)
    if match is None:
        raise ValueError(f"the cost model has no formula for configuration {config!r}")
    wire = model_bytes / 2 if match.group(3) else model_bytes
    return wire, int(match.group(1)), bool(match.group(2))


def step_time(config, compute_secs, model_bytes, cluster, costs):
    """Predicted seconds per local step of a worker under `config` (`local`, `async`,
    `sync`, `easgd-TAU[-overlap][-bf16]`) on `cluster`."""
    if config == "local":
        return compute_secs
    if config == "sync":  # Everyone sends, the ps applies, then everyone reads, at once.
        p = cluster.ps_tasks
        cpu = costs.worker_secs(model_bytes, p) + p * costs.ps_secs(model_bytes, p)
        wire = 0.0
        if cluster.rate_bits:
            bandwidth = costs.link_efficiency * cluster.rate_bits / 8
            wire = 2 * model_bytes / bandwidth * max(1.0, cluster.workers / p)
        return compute_secs + cpu + wire
    wire_bytes, period, overlap = config_exchange(config, model_bytes)
    predicted = predict(cluster, costs, wire_bytes, period, compute_secs, overlap)
    return 1.0 / predicted.steps_per_sec


def best_efficiency(error):
    """The link efficiency of `E_GRID` with the least `error(efficiency)` (the first)."""
    errors = [error(efficiency) for efficiency in E_GRID]
    return float(E_GRID[errors.index(min(errors))])


def fit_link_efficiency(measurements, model_bytes, costs):
    """`costs` with the link efficiency that best matches `measurements`, (config, compute
    secs, `Cluster`, measured secs per step) (least squares of the logs)."""

    def error(efficiency):
        trial = dataclasses.replace(costs, link_efficiency=float(efficiency))
        return sum((math.log(step_time(c, compute, model_bytes, net, trial)) - math.log(t)) ** 2
                   for c, compute, net, t in measurements)  # fmt: skip

    return dataclasses.replace(costs, link_efficiency=best_efficiency(error))


def scaling_limit(config, compute_secs, model_bytes, cluster, costs, slowdown=0.9):
    """The fewest workers at which a worker's steps/s falls below `slowdown` times its
    speed with one worker on the same links; None if not below 100,000."""

    def slow(workers):
        grown = dataclasses.replace(cluster, workers=workers)
        return step_time(config, compute_secs, model_bytes, grown, costs) * slowdown > alone

    one = dataclasses.replace(cluster, workers=1)
    alone, low, high = step_time(config, compute_secs, model_bytes, one, costs), 1, 100_000
    if not slow(high):
        return None
    while low < high:  # Step time grows with W: the first W past the bound.
        middle = (low + high) // 2
        low, high = (low, middle) if slow(middle) else (middle + 1, high)
    return low


def ps_tasks_needed(workers, wire_bytes, period, compute_secs, costs, rate_bits, ps_cores,
                    busy=0.8):  # fmt: skip
    """The fewest ps tasks (machines of `ps_cores` cores, links of `rate_bits`) that serve
    `workers` exchanging every `period` steps of `compute_secs` with every ps resource at
    most `busy` of the time: P >= W f B / (busy e' R / 8) for the links, and
    P >= W f (P a' + 2 B k') / (busy n) for the CPU, f = 1 / (tau c) exchanges/s a worker
    offers (docs/SCALING.md, "The rule"). Crowding is taken at that load: a resource busy
    u of the time holds u / (1 - u) customers on average (one server, random arrivals), so
    e' = e / (1 + 2 u / (1 - u) link_crowding) (both ways of the link), and a' and k' are
    a and k times 1 + u / (1 - u) ps_crowding. None if no P does (the calls alone
    saturate)."""
    queue = busy / (1 - busy)
    efficiency = costs.link_efficiency / (1 + 2 * queue * costs.link_crowding)
    dearer = 1 + queue * costs.ps_crowding
    offered = workers / (period * compute_secs)
    link = offered * wire_bytes / (busy * efficiency * rate_bits / 8)
    spare = busy * ps_cores - offered * costs.ps_call_secs * dearer
    if spare <= 0:
        return None
    cpu = offered * 2 * wire_bytes * costs.ps_byte_secs * dearer / spare
    return max(1, math.ceil(max(link, cpu) - 1e-9))
