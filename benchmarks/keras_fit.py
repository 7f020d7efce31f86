"""The Keras section: `model.fit` with `ElasticAverageCallback` beside plain `model.fit`.

On 1 ps + the workers running common/keras_task.py, the digits MLP trains with plain
`model.fit` on each worker alone (`keras-fit`) and with EASGD at tau 10 (`keras-easgd-10`, also
overlapped): throughput in interleaved rounds, and time to accuracy, as sections 1 and 3.
"""

from benchmarks import exchange
from benchmarks.common import protocol, report
from benchmarks.common.harness import BenchCluster, throughput, time_to_accuracy
from benchmarks.common.report import median_of, num, per_round_ratio

CONFIGS = ("keras-fit", "keras-easgd-10", "keras-easgd-10-overlap")
ACCURACY_CONFIGS = (("keras-easgd-10", None), ("keras-fit", 1))
#: Seconds from a command to the measurement: each worker links to the centre and traces.
START_SECS = 8.0
#: Batches between two exchanges of `keras-easgd-10`.
PERIOD = 10
THROUGHPUT_TARGET = 0.85


def measure(workers, quick, netns, logs, log):
    """{"model", "throughput": {config: [rounds]}, "accuracy": {config: [runs]}}."""
    model, module = protocol.DIGITS_MLP.name, "benchmarks.common.keras_task"
    with BenchCluster(workers, logs / "keras", "tf2", netns, module=module) as cluster:
        log(f"keras: {model}, 1 ps + {workers} workers (model.fit, eager)")
        rounds, seconds = (1, 3.0) if quick else (3, 8.0)
        measured = throughput(cluster, model, CONFIGS, rounds, seconds, START_SECS, log)
    # Each run to accuracy on a cluster of its own, as a job has: builds in one cluster share
    # the centre (named by weight position), so a later run would start from a trained one.
    accuracy = {config: [] for config, _ in ACCURACY_CONFIGS}
    for repeat in range(1 if quick else 2):
        for config, team in ACCURACY_CONFIGS:
            folder = logs / f"keras-{config}-{repeat}"
            with BenchCluster(workers, folder, "tf2", netns, module=module) as cluster:
                seconds = 6.0 if quick else 12.0  # 97 % within 3.5 s in every run here.
                run = time_to_accuracy(cluster, ((config, team),), 1, seconds, 0.5, log, START_SECS)
            accuracy[config] += run[config]
    return {"model": model, "throughput": measured, "accuracy": accuracy}


def render(results):
    if "keras" not in results:
        return []
    section = results["keras"]
    rows = [row.split(" | ", 1) for row in report.accuracy_rows(section["accuracy"])]
    accuracy, rows = dict(rows), []
    for config in section["throughput"]:
        steps = num(median_of(section["throughput"], config))
        ratio = num(per_round_ratio(section["throughput"], config, "keras-fit"), 2)
        rows.append(f"{config} | {steps} | {ratio} | {accuracy.get(config, '- | - | - | -')}")
    header = "-configuration | steps/s | x keras-fit | workers | -s to 97% (each run) | median s | "
    header += "final accuracy"
    made = report.made_by(results, "keras", "keras_fit")
    out = ["## Keras model.fit", "", made, "", KERAS, "", report.table(header, rows), ""]
    return out + _floor(results)


def _floor(results):
    """What the exchange's floor allows: its CPU, paid by every worker every tau batches on
    cores the workers and the ps share, bounds even a perfectly overlapped exchange."""
    ms_per_mb, by_config = exchange.floor_ms_per_mb(results), results["keras"]["throughput"]
    if ms_per_mb is None or "keras-fit" not in by_config:
        return []
    workers, cores = results["workers"], results["machine"]["cores"]
    moved_mb = 2 * 4 * protocol.MODELS[results["keras"]["model"]].num_params / 1e6
    exchange_ms = ms_per_mb * moved_mb
    period_ms = PERIOD * 1e3 / median_of(by_config, "keras-fit")
    bound = min(1.0, cores * period_ms / (workers * (period_ms + exchange_ms)))
    return [
        f"At the floor of the section below ({ms_per_mb:.2f} ms of CPU a MB moved), an "
        f"exchange of this model ({moved_mb:.1f} MB) costs {exchange_ms:.1f} ms of CPU, which "
        f"each of {workers} workers pays every {PERIOD} batches of {period_ms:.1f} ms on "
        f"{cores} cores shared with the ps: even perfectly overlapped, at most "
        f"{bound:.2f} x keras-fit.",
        "",
    ]


def targets(results):
    if "keras" not in results:
        return []
    by_config = results["keras"]["throughput"]
    ratio = median_of(by_config, "keras-easgd-10") / median_of(by_config, "keras-fit")
    in_round = per_round_ratio(by_config, "keras-easgd-10", "keras-fit")
    target = f"Keras model.fit + EASGD tau=10 >= {THROUGHPUT_TARGET} x plain model.fit"
    measured = f"{ratio:.2f} x (medians), {in_round:.2f} x (per round)"
    return [(target, measured, ratio >= THROUGHPUT_TARGET)]


KERAS = """\
Eager `model.fit` (Keras 3) of the digits MLP on each worker; `keras-easgd-10` adds
`ElasticAverageCallback` (tau 10). Time to accuracy: of the centre, or of `keras-fit`'s
one worker."""
