"""A model of the time of a local step of each algorithm on a ps/worker network, and its fit.

The time of a worker's local step, from: c, its compute time (measured: `local`); B, the
model's bytes; b, the bytes a worker moves per local step (2B for async and sync, 2B/tau for
EASGD); the payload bandwidth of a link, e * rate / 8; the fan-in of the parameter servers,
W workers on P ps links; and k, the CPU time a worker spends per byte moved (serialising,
copying). Links are full duplex and each moves half of b each way.

- local: c.
- async, easgd-tau: a worker computes, then waits for its transfers:
  max(c + k b + b / bw, W b / (2 P bw)), the second term the ps links' limit.
- easgd-tau-overlap: transfers travel during the next tau steps:
  max(c + k b, b / bw, W b / (2 P bw)).
- sync: every worker sends, then reads, at once: c + k b + max(b / bw, W b / (P bw)).

`fit` chooses k and e that best match measured step times (least squares of the logs,
on a grid); `step_time` then predicts other networks and cluster sizes. docs: BENCHMARKS.md
section 6.
"""

import dataclasses
import math
import re

import numpy as np

_EASGD = re.compile(
    r"^easgd-(\d+)(?:-alpha[0-9.a-z]+)?(?:-rho[0-9.a-z]+)?(-overlap)?(-bf16|-fp16)?$"
)
#: The grid of the fit: CPU nanoseconds per byte, and link efficiencies.
K_GRID_NS = np.concatenate([[0.0], np.geomspace(0.05, 50.0, 400)])
E_GRID = np.linspace(0.5, 1.0, 101)


@dataclasses.dataclass(frozen=True)
class Network:
    """Where the workers run.

    Attributes:
        rate_bits: line rate of every task's link, bits per second.
        workers: W.
        ps_tasks: P, the parameter servers sharing the centre (and the fan-in) evenly.
    """

    rate_bits: float
    workers: int
    ps_tasks: int = 1


@dataclasses.dataclass(frozen=True)
class Fit:
    """The fitted constants: CPU seconds per byte moved (k) and link efficiency (e)."""

    cpu_secs_per_byte: float
    link_efficiency: float


def bytes_per_step(config, model_bytes):
    """b: the bytes a worker sends plus receives per local step under `config`."""
    if config == "local":
        return 0.0
    if config in ("async", "sync"):
        return 2.0 * model_bytes
    match = _EASGD.match(config)
    if match is None:
        raise ValueError(f"the cost model has no formula for configuration {config!r}")
    wire = 0.5 if match.group(3) else 1.0  # A 16-bit wire moves half the bytes.
    return 2.0 * model_bytes * wire / int(match.group(1))


def step_time(config, compute_secs, model_bytes, network, fit):
    """Predicted seconds per local step of a worker under `config` on `network`."""
    b = bytes_per_step(config, model_bytes)
    if b == 0.0:
        return compute_secs
    bandwidth = fit.link_efficiency * network.rate_bits / 8.0
    cpu = compute_secs + fit.cpu_secs_per_byte * b
    fan_in = network.workers * b / (2.0 * network.ps_tasks * bandwidth)
    if config == "sync":
        return cpu + max(b / bandwidth, 2.0 * fan_in)
    if "-overlap" in config:
        return max(cpu, b / bandwidth, fan_in)
    return max(cpu + b / bandwidth, fan_in)


def fit(measurements, model_bytes):
    """Fits k and e to `measurements`: (config, compute secs, `Network`, measured secs)."""
    best, best_error = None, math.inf
    for k_ns in K_GRID_NS:
        for efficiency in E_GRID:
            candidate = Fit(k_ns * 1e-9, float(efficiency))
            error = sum(
                (math.log(step_time(c, compute, model_bytes, net, candidate)) - math.log(t)) ** 2
                for c, compute, net, t in measurements
            )
            if error < best_error:
                best, best_error = candidate, error
    return best


def scaling_limit(config, compute_secs, model_bytes, network, fit, slowdown=0.9):
    """The fewest workers at which a worker's steps/s falls below `slowdown` times its
    speed with one worker on the same links; None if not below 100,000."""
    alone = step_time(
        config, compute_secs, model_bytes, dataclasses.replace(network, workers=1), fit
    )
    low, high = 1, 100_000
    if (
        step_time(
            config, compute_secs, model_bytes, dataclasses.replace(network, workers=high), fit
        )
        * slowdown
        <= alone
    ):
        return None
    while low < high:  # Step time grows with W: the first W past the bound.
        middle = (low + high) // 2
        grown = step_time(
            config, compute_secs, model_bytes, dataclasses.replace(network, workers=middle), fit
        )
        if grown * slowdown > alone:
            high = middle
        else:
            low = middle + 1
    return low
