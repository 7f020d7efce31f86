"""The original as oracle: runs support/contrib_scenarios.py under contrib and this package.

One oracle run is four processes, each writing one JSON file per run of a scenario (see
contrib_scenarios.py); the two package processes run at once, between the contrib ones:

1. `contrib`: TensorFlow 1.15 with `tf.contrib.opt` (`.venv-tf115/bin/python`) trains
   every scenario, writes the checkpoints of the checkpoint scenarios and continues from
   them (its own continuation, the reference for the package's).
2. `package-tf1`: this interpreter (TensorFlow 2.21 under `make test`, 2.15 under `make
   test-tf215`) with the package, `tf.compat.v1.disable_v2_behavior()` (ref variables),
   exchanges by `RemoteCall` (a session without `share_cluster_devices_in_session`, as a
   migrated TF1 script has): the same scenarios, its own checkpoints and continuations, and
   continuations from contrib's checkpoints.
3. `package-tf2`: the same in TF 2 graph mode (resource variables), with direct exchanges
   (`share_cluster_devices_in_session=True`).
4. `contrib-restore`: contrib again, continuing from the package's checkpoints.

The results are cached for the pytest session. Without `.venv-tf115` (`make
test-contrib` builds it where a Python 3.7 exists) the tests that need them skip.

Tolerance. Both sides run the same float32 graph on CPU, but not the same kernels: TF
1.15's and 2.21's float32 `tanh` round differently (Eigen's approximation changed; on 4096
points in [-5, 5] they disagree in 70 % of the values, by up to 2.4e-7, two ulps at 1), so
the gradients differ by an ulp or two from the first step on, and momentum (up to
1 / (1 - 0.9) = 10x) carries such differences on. Values here are of order 1; the largest
difference measured over every variable after every step of every scenario was 6.6e-7 on
TF 2.21 (see the report of `test_largest_difference`). `ATOL` = 2e-6 (about 17 ulps at 1)
leaves a margin of three, and is four orders of magnitude below what a real difference in
the algorithm makes (a step or an exchange missed, a wrong rho or pairing: at least
moving_rate * |x - centre|, 1e-3 to 1e-1 here). Integer variables (`local_step`,
`global_step`) must be equal; restored values must be equal bit for bit.
"""

import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np

import tf_contrib_easgd

HERE = pathlib.Path(__file__).parent
ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIO_PROGRAM = HERE / "contrib_scenarios.py"
TF115_PYTHON = pathlib.Path(
    os.environ.get("EASGD_TF115_PYTHON", str(ROOT / ".venv-tf115" / "bin" / "python"))
)
# The package's two variable worlds and the exchange transport each is run with.
WORLDS = {"tf1": "remote_call", "tf2": "direct"}
CHECKPOINT_KINDS = ("default", "full", "swapping")

ATOL = 2e-6
RTOL = 1e-6
# Each of the four processes has this long (they take 10-70 s on a busy 2-core machine).
PROCESS_TIMEOUT_SECS = 240
# Whole oracle runs take up to four processes' time; the tests that start one get this.
TEST_TIMEOUT_SECS = 4 * PROCESS_TIMEOUT_SECS + 60


def skip_reason():
    """Why the oracle cannot run here, or None."""
    if not os.access(TF115_PYTHON, os.X_OK):
        return (
            f"no TensorFlow 1.15 interpreter at {TF115_PYTHON}: `make test-contrib` builds "
            ".venv-tf115 (tensorflow==1.15.5, Python 3.7) and runs the differential tests "
            "against tf.contrib.opt"
        )
    return None


class OracleError(RuntimeError):
    """A process of the oracle run failed or timed out."""


#: The package processes of this pytest session that died by a signal and ran again. A
#: native crash (SIGSEGV, or an abort on a corrupt `std::string`) hit `package-tf1` (the
#: TF1 world's exchanges by `RemoteCall`, every server in one process) while an exchange's
#: `RemoteCall`s went to its ps tasks at once; they go one after the other since
#: (docs/RELIABILITY.md, "Known problems"). The rerun stays as a guard; the report of
#: `test_largest_difference` names every rerun, so it is never silent.
RERUNS = []


def _environment(package):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTEROP_THREADS="16")
    env.pop("TF_CONFIG", None)
    env.pop("PYTHONPATH", None)  # Never this interpreter's paths in Python 3.7.
    if package:
        # The package the tests import (the checkout, or Bazel's runfiles tree).
        env["PYTHONPATH"] = str(pathlib.Path(tf_contrib_easgd.__file__).parent.parent)
    return env


def _run_once(command, out, log, package):
    """Runs `command` in folder `out`, its output into `log`; returns its exit code, negative
    for a signal, or a string for a timeout."""
    out.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as output:
        try:
            return subprocess.run(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=_environment(package),
                cwd=str(out),
                timeout=PROCESS_TIMEOUT_SECS,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            return f"a timeout after {PROCESS_TIMEOUT_SECS} s"


def _run(python, arguments, out, package):
    """Runs contrib_scenarios.py with `python` into folder `out`; raises OracleError.

    A package process that dies by a signal runs once more from scratch (see `RERUNS`); a
    second death, a non-zero exit or a timeout fails the run.
    """
    command = [str(python), str(SCENARIO_PROGRAM), f"--out={out}", *arguments]
    log = out.parent / f"{out.name}.log"
    code = _run_once(command, out, log, package)
    if package and isinstance(code, int) and code < 0:
        kept = log.with_name(f"{out.name}.signal{-code}.log")
        log.rename(kept)
        shutil.rmtree(out)
        RERUNS.append(f"{out.name} died by signal {-code} and ran again (its log: {kept})")
        code = _run_once(command, out, log, package)
    if code != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise OracleError(f"{' '.join(command)} ended with {code}:\n{tail}")
    return out


class Oracle:
    """The results of one oracle run (the four processes of the module docstring)."""

    def __init__(self, base, scenarios=None):
        """Runs the processes in folder `base`.

        Args:
            base: an empty folder.
            scenarios: names of the scenarios to run; None for all of them.
        """
        self.base = pathlib.Path(base)
        self.scenarios = scenarios
        only = [f"--only={','.join(scenarios)}"] if scenarios else []
        contrib = _run(
            TF115_PYTHON,
            ["--implementation=contrib", "--train", *only],
            self.base / "contrib",
            False,
        )
        # The two package processes need only contrib's checkpoints: they run at once
        # (~25 s each, mostly one core apiece), the last contrib process after both.
        with concurrent.futures.ThreadPoolExecutor(len(WORLDS)) as pool:
            packages = {
                world: pool.submit(
                    _run,
                    sys.executable,
                    [
                        "--implementation=package",
                        f"--world={world}",
                        f"--transport={transport}",
                        "--train",
                        f"--restore=contrib={contrib / 'checkpoints'}",
                        *only,
                    ],
                    self.base / f"package-{world}",
                    True,
                )
                for world, transport in WORLDS.items()
            }
        restores = [
            f"--restore=package-{world}={future.result() / 'checkpoints'}"
            for world, future in packages.items()
        ]
        _run(
            TF115_PYTHON,
            ["--implementation=contrib", *restores, *only],
            self.base / "contrib-restore",
            False,
        )

    def result(self, side, name):
        """The JSON result of run `name` by `side`: "contrib", "contrib-restore" or
        "package-tf1"/"package-tf2"."""
        with open(self.base / side / f"{name}.json", encoding="utf-8") as file:
            return json.load(file)

    def covers(self, scenarios):
        return self.scenarios is None or (
            scenarios is not None and set(scenarios) <= set(self.scenarios)
        )


_RUNS = []


def oracle(tmp_path_factory, scenarios=None):
    """The oracle run of this pytest session that covers `scenarios` (None: all).

    Runs one the first time; a failed run is not repeated but reported to every caller.
    """
    for run in _RUNS:
        if isinstance(run, Oracle) and run.covers(scenarios):
            return run
        if isinstance(run, OracleError):
            raise run
    try:
        run = Oracle(tmp_path_factory.mktemp("contrib_oracle"), scenarios)
    except OracleError as error:
        _RUNS.append(error)
        raise
    _RUNS.append(run)
    return run


def array(encoded):
    """A value as the scenario program encoded it, as a numpy array."""
    return np.array(encoded["values"], dtype=encoded["dtype"]).reshape(encoded["shape"])


def assert_values_match(ours, theirs, where, exact=False):
    """Asserts two {name: encoded value} dicts have the same names and matching values.

    Integers and (`exact`) every value must be equal; floats within `ATOL` + `RTOL`.
    """
    assert sorted(ours) == sorted(theirs), f"{where}: variables differ"
    for name in sorted(theirs):
        mine, reference = array(ours[name]), array(theirs[name])
        assert mine.dtype == reference.dtype, f"{where} {name}: {mine.dtype} != {reference.dtype}"
        assert mine.shape == reference.shape, f"{where} {name}: {mine.shape} != {reference.shape}"
        if exact or mine.dtype.kind != "f":
            np.testing.assert_array_equal(mine, reference, err_msg=f"{where} {name}")
            continue
        np.testing.assert_allclose(mine, reference, rtol=RTOL, atol=ATOL, err_msg=f"{where} {name}")


def assert_trajectories_match(ours, theirs, label):
    """Asserts every snapshot (every variable after every step) of two runs match."""
    assert ours["error"] is None, f"{label}: {ours['error']}"
    assert theirs["error"] is None, f"{label}, contrib: {theirs['error']}"
    assert len(ours["steps"]) == len(theirs["steps"]), label
    for number, (mine, reference) in enumerate(zip(ours["steps"], theirs["steps"], strict=True)):
        assert mine["worker"] == reference["worker"], f"{label} snapshot {number}"
        assert_values_match(mine["values"], reference["values"], f"{label} snapshot {number}")


def largest_difference(ours, theirs):
    """The largest float difference between the snapshots of two runs, and where."""
    largest, where = 0.0, "nowhere"
    for number, (mine, reference) in enumerate(zip(ours["steps"], theirs["steps"], strict=False)):
        for name, value in reference["values"].items():
            if name not in mine["values"]:
                continue
            difference = np.abs(array(mine["values"][name]) - array(value))
            if difference.size and array(value).dtype.kind == "f" and difference.max() > largest:
                largest, where = float(difference.max()), f"snapshot {number} {name}"
    return largest, where


def continuation_pairs(oracle_run, scenario):
    """The continuations from checkpoints to compare, as (label, ours, contrib's) triples.

    For each world and checkpoint kind: contrib's checkpoint continued by the package
    against contrib's own continuation of it, and the package's checkpoint continued by
    contrib against the package's own continuation of it.
    """
    for world in WORLDS:
        package = f"package-{world}"
        for kind in CHECKPOINT_KINDS:
            name = f"{scenario}@contrib-{kind}"
            yield (
                f"contrib's {kind} checkpoint continued by {package}",
                oracle_run.result(package, name),
                oracle_run.result("contrib", name),
            )
            name = f"{scenario}@{package}-{kind}"
            yield (
                f"{package}'s {kind} checkpoint continued by contrib",
                oracle_run.result(package, name),
                oracle_run.result("contrib-restore", name),
            )
