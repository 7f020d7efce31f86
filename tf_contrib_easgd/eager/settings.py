"""An eager worker's arguments, checked before anything is built, and its check of the mode.

`Settings.checked` is shared by `ElasticAverageWorker` and `ElasticAverageCallback`, so both
refuse the same bad arguments with the same messages, naming the argument and the value.
"""

import dataclasses
import math
import os
import threading

import tensorflow as tf

from tf_contrib_easgd import _validation
from tf_contrib_easgd.cluster.resolver import ClusterTask
from tf_contrib_easgd.exchange.wire import check_wire_dtype

#: The default moving rate is the paper's beta / W, as easgd-train's, not contrib's
#: beta / tau / W, which `ElasticAverageOptimizer` keeps for migrated scripts: with it the
#: centre lags the workers (BENCHMARKS.md, "Against TF 2's strategies").
PAPER_BETA = 0.9
#: With `overlap`, the default moving rate is at most this: a move that lands a period late
#: and takes back most of the worker's lead also takes back most of what it learnt since
#: (as easgd-train, which turns overlap off above it).
OVERLAP_MAX_DEFAULT_RATE = 0.5


@dataclasses.dataclass(frozen=True)
class Settings:
    """A worker's checked arguments (see `ElasticAverageWorker`); `checked` makes one."""

    task: ClusterTask
    period: int
    moving_rate: float
    model_dir: str | None
    timeout_secs: float
    save_steps: int | None
    stop_ps: bool
    server: object
    overlap: bool
    wire_dtype: tf.DType | None = None

    @classmethod
    def checked(
        cls,
        cluster,
        communication_period,
        moving_rate,
        model_dir,
        timeout_secs,
        save_checkpoint_steps,
        stop_parameter_servers,
        server,
        overlap,
        wire_dtype=None,
    ):
        """The arguments, checked; `moving_rate` None becomes `PAPER_BETA` / workers (with
        `overlap`, at most `OVERLAP_MAX_DEFAULT_RATE`), and
        `wire_dtype` None or float32 (by `tf.DType` or name) becomes None.

        Raises:
            TypeError: if an argument has the wrong type (e.g. `cluster` is None).
            ValueError: if an argument is out of range, or `cluster` is a parameter server.
        """
        task = _checked_worker(cluster)
        period = _validation.check_int(communication_period, "communication_period", 1)
        rate = _validation.check_number(moving_rate, "moving_rate", low=0.0, high=1.0)
        if model_dir is not None and not isinstance(model_dir, str | os.PathLike):
            raise TypeError(f"model_dir must be a path or None, got {model_dir!r}.")
        timeout_secs = _checked_timeout(timeout_secs)
        if save_checkpoint_steps is not None:
            _validation.check_int(save_checkpoint_steps, "save_checkpoint_steps", 1)
        stop_ps = _validation.check_bool(stop_parameter_servers, "stop_parameter_servers")
        if server is not None and not hasattr(server, "target"):
            raise TypeError(f"server must be a tf.distribute.Server or None, got {server!r}.")
        overlap = _validation.check_bool(overlap, "overlap")
        return cls(
            task=task,
            period=period,
            moving_rate=_default_rate(task.num_workers, overlap) if rate is None else rate,
            model_dir=None if model_dir is None else os.fspath(model_dir),
            timeout_secs=timeout_secs,
            save_steps=save_checkpoint_steps,
            stop_ps=stop_ps,
            server=server,
            overlap=overlap,
            wire_dtype=check_wire_dtype(wire_dtype),
        )


def _default_rate(num_workers, overlap):
    """The moving rate when none is given: beta / workers, capped with `overlap`."""
    rate = PAPER_BETA / num_workers
    return min(rate, OVERLAP_MAX_DEFAULT_RATE) if overlap else rate


def check_eager(who, what):
    """Raises `ValueError` unless eager execution is on: `who` trains `what` in TF 2."""
    if not tf.executing_eagerly():
        raise ValueError(
            f"{who} works with {what} in eager mode (TF 2), but this runs in graph mode "
            "(eager execution disabled by tf.compat.v1.disable_eager_execution() or "
            "disable_v2_behavior(), or a tf.Graph().as_default() block). In a TF1 graph, "
            "train with ElasticAverageOptimizer instead."
        )


def _checked_timeout(timeout_secs):
    """`timeout_secs`, checked: a finite number of seconds that every wait can take (Python's
    waits refuse more than `threading.TIMEOUT_MAX`, about 292 years)."""
    if timeout_secs is None:
        raise TypeError("timeout_secs must be a number of seconds, got None.")
    timeout_secs = _validation.check_number(timeout_secs, "timeout_secs", low=0.0)
    if not math.isfinite(timeout_secs) or timeout_secs > threading.TIMEOUT_MAX:
        raise ValueError(
            f"timeout_secs must be a finite number of seconds, at most "
            f"{threading.TIMEOUT_MAX:.0f}, got {timeout_secs!r}: it bounds every wait on "
            "another task."
        )
    return timeout_secs


def _checked_worker(cluster):
    """`cluster`, checked: a `ClusterTask` of a worker."""
    if not isinstance(cluster, ClusterTask):
        raise TypeError(
            "cluster must be the tf_contrib_easgd.ClusterTask of this worker (from "
            "cluster_from_hosts, cluster_from_tf_config or cluster_from_slurm), got "
            f"{cluster!r} of type {type(cluster).__name__}."
        )
    if cluster.is_ps:
        raise ValueError(
            f"cluster is {cluster.name}, a parameter server: a ps task serves the centre "
            "(tf_contrib_easgd.serve_until_done(server)) and trains nothing."
        )
    return cluster
