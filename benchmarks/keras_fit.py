"""The Keras section: `model.fit` with `ElasticAverageCallback` beside plain `model.fit`.

On 1 ps + the workers running keras_task.py, the digits MLP trains with plain `model.fit`
on each worker alone (`keras-fit`) and with EASGD at tau 10 (`keras-easgd-10`, also
overlapped): throughput in interleaved rounds, and time to accuracy, as sections 1 and 3.
"""

from benchmarks import specs, tables
from benchmarks.harness import BenchCluster
from benchmarks.rounds import ACCURACY_TARGET, throughput, time_to_accuracy
from benchmarks.tables import num, per_round_ratio

CONFIGS = ("keras-fit", "keras-easgd-10", "keras-easgd-10-overlap")
ACCURACY_CONFIGS = (("keras-easgd-10", None), ("keras-fit", 1))
#: Seconds from a command to the measurement: each worker links to the centre and traces.
START_SECS = 8.0
THROUGHPUT_TARGET = 0.85


def measure(workers, quick, rounds, netns, logs, log):
    """{"model", "throughput": {config: [rounds]}, "accuracy": {config: [runs]}}."""
    model = specs.DIGITS_MLP.name
    with BenchCluster(
        1, workers, "tf2", logs / "keras", netns=netns, module="benchmarks.keras_task"
    ) as cluster:
        log(f"keras: {model}, 1 ps + {workers} workers (model.fit, eager)")
        measured = throughput(
            cluster, model, CONFIGS, rounds, 3.0 if quick else 8.0, START_SECS, log
        )
    # Each run to accuracy on a cluster of its own, as a job has. In one cluster, worker 1's
    # second callback after a run it sat out waited for the centre until its deadline
    # (make bench, twice on 2026-12-05, both at the same point; not understood yet).
    accuracy = {config: [] for config, _ in ACCURACY_CONFIGS}
    for repeat in range(1 if quick else 2):
        for config, team in ACCURACY_CONFIGS:
            with BenchCluster(
                1, workers, "tf2", logs / f"keras-{config}-{repeat}", netns=netns,
                module="benchmarks.keras_task",
            ) as cluster:  # fmt: skip
                run = time_to_accuracy(
                    cluster, ((config, team),), 1, 10.0 if quick else 25.0, 0.5, log,
                    lead_secs=START_SECS,
                )  # fmt: skip
            accuracy[config].extend(run[config])
    return {"model": model, "throughput": measured, "accuracy": accuracy}


def render(results):
    if "keras" not in results:
        return []
    section = results["keras"]
    accuracy = tables.accuracy_rows(section["accuracy"], ACCURACY_TARGET)
    accuracy = {row.split(" | ", 1)[0]: row.split(" | ", 1)[1] for row in accuracy}
    rows = []
    for config in section["throughput"]:
        steps = num(tables.median_of(section["throughput"], config))
        ratio = num(per_round_ratio(section["throughput"], config, "keras-fit"), 2)
        rows.append(f"{config} | {steps} | {ratio} | {accuracy.get(config, '- | - | - | -')}")
    header = "-configuration | steps/s | x keras-fit | workers | -s to 97% (each run) | median s | "
    header += "final accuracy"
    return ["## Keras model.fit", "", KERAS, "", tables.table(header, rows), ""]


def targets(results):
    if "keras" not in results:
        return []
    by_config = results["keras"]["throughput"]
    ratio = tables.median_of(by_config, "keras-easgd-10") / tables.median_of(by_config, "keras-fit")
    in_round = per_round_ratio(by_config, "keras-easgd-10", "keras-fit")
    target = f"Keras model.fit + EASGD tau=10 >= {THROUGHPUT_TARGET} x plain model.fit"
    measured = f"{ratio:.2f} x (medians), {in_round:.2f} x (per round)"
    return [(target, measured, ratio >= THROUGHPUT_TARGET)]


KERAS = """\
Eager `model.fit` (Keras 3) of the digits MLP on each worker; `keras-easgd-10` adds
`ElasticAverageCallback` (tau 10). Time to accuracy: of the centre, or of `keras-fit`'s
one worker."""
