"""End-to-end tests (ps and worker OS processes): tf_contrib_easgd.estimator, EASGD in a
tf.estimator model_fn.

The tests of its other tiers are in tests/unit/test_estimator.py.
"""

import json
import os
import pathlib
import re
import sys
import time

import portpicker
import pytest
from estimator_support import (
    HAS_ESTIMATOR,
    TARGET_ACCURACY,
    TAU,
    WARNING_FILTERS,
    requires_estimator,
)

from tf_contrib_easgd.runner import launcher

if HAS_ESTIMATOR:
    from tf_contrib_easgd.estimator import (
        exchanges_for,
    )


pytestmark = WARNING_FILTERS  # The models' warnings (estimator_support).


ROOT = pathlib.Path(__file__).resolve().parents[2]


EXAMPLE = ROOT / "examples" / "estimator_digits.py"


# The multi-process run: examples/estimator_digits.py as chief, worker, ps and evaluator,
# each with its own TF_CONFIG. Importing TensorFlow and tf.estimator takes ~10 s per process
# on a 2-core machine (longer with four at once). The worker waits for the chief's first
# checkpoint and then needs another ~3 s to build its graph and session while the chief
# trains alone (at ~120 steps/s with four processes on two cores); 2 x 1000 local steps keep
# both training together for several seconds (with 2 x 400 the worker once joined as the
# chief finished). The evaluator exits after evaluating a checkpoint with global_step >=
# max_steps. One run took 37 s.
E2E_LOCAL_STEPS = 1000


E2E_DEADLINE_S = 240


E2E_STALL_S = 120


_REPORT = re.compile(
    r"^(?P<task>\w+ \d+) (?:ran (?P<steps>\d+) local steps|evaluated: "
    r"accuracy=(?P<accuracy>[\d.]+) global_step=(?P<global_step>\d+))$"
)


@requires_estimator
@pytest.mark.timeout(E2E_DEADLINE_S + 60)
def test_train_and_evaluate_on_a_tf_config_cluster(tmp_path):
    ports = {job: portpicker.pick_unused_port() for job in ("chief", "worker", "ps")}
    cluster = {job: [f"localhost:{port}"] for job, port in ports.items()}
    tasks = []
    for job in ("ps", "chief", "worker", "evaluator"):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": job, "index": 0}})
        argv = (
            "env",
            f"TF_CONFIG={tf_config}",
            sys.executable,
            str(EXAMPLE),
            f"--model_dir={tmp_path / 'model'}",
            f"--local_steps={E2E_LOCAL_STEPS}",
            f"--communication_period={TAU}",
            "--throttle_secs=1",
        )
        tasks.append(launcher.TaskSpec(job, 0, argv, finishes=job != "ps"))
    env = dict(
        os.environ,
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    reports = {}
    deadline = time.monotonic() + E2E_DEADLINE_S

    def on_line(task, line):
        match = _REPORT.match(line)
        if match:
            reports[match["task"]] = match.groupdict()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not finish within {E2E_DEADLINE_S} s")

    start = time.monotonic()
    with launcher.LocalCluster(
        tasks, env=env, log_dir=tmp_path / "logs", on_line=on_line, stall_timeout_secs=E2E_STALL_S
    ) as running:
        running.start()
        running.supervise()  # Until chief, worker and evaluator exited 0; then stops the ps.
    print(f"cluster done after {time.monotonic() - start:.0f} s: {reports}")

    max_steps = exchanges_for(E2E_LOCAL_STEPS, num_workers=2, communication_period=TAU)
    chief_steps = int(reports["chief 0"]["steps"])
    worker_steps = int(reports["worker 0"]["steps"])
    final = reports["evaluator 0"]
    assert worker_steps >= TAU, "the worker took no part in the exchanges"
    # global_step sums the exchanges of both workers; training stopped once it reached
    # max_steps (a worker may add one more exchange after the chief's last checkpoint).
    assert max_steps <= int(final["global_step"]) <= chief_steps // TAU + worker_steps // TAU
    assert float(final["accuracy"]) >= TARGET_ACCURACY
    # The example's session_config() made both trainers' exchanges direct (transport.py).
    for trainer in ("chief_0", "worker_0"):
        log = (tmp_path / "logs" / f"{trainer}.log").read_text()
        assert "exchanges call the parameter servers directly" in log, trainer
