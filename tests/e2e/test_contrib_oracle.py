"""Differential tests: every scenario under the original tf.contrib.opt and under this package.

The scenarios are in contrib_scenarios.py, the processes that run them and the tolerance
in contrib_oracle.py. Contrib (TensorFlow 1.15, `.venv-tf115`) is the oracle: wherever it
succeeds, the package must make the same variables, with the same names, collections and
devices, and the same values after every step, in both variable worlds. Where contrib
fails, the test asserts its failure next to the package's result, and compares that result
with the contrib run that means the same. `make test-contrib` builds `.venv-tf115` and runs
these tests; without it they skip.
"""

import ast
import pathlib

import contrib_oracle
import contrib_scenarios
import pytest
from contrib_oracle import (
    ATOL,
    CHECKPOINT_KINDS,
    WORLDS,
    array,
    assert_trajectories_match,
    assert_values_match,
    continuation_pairs,
    largest_difference,
    skip_reason,
)
from contrib_oracle import oracle as run_oracle
from contrib_scenarios import BY_NAME, SCENARIOS

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.cluster,
    # One oracle run per process serves this file and test_checkpoint_compat.py: under
    # pytest-xdist (`make test`) the group keeps them on one worker.
    pytest.mark.xdist_group("contrib_oracle"),
    pytest.mark.timeout(contrib_oracle.TEST_TIMEOUT_SECS),
]

# Where contrib fails: scenario -> (error class, part of its message, the scenario that
# means the same and contrib can run). The package must train there, as that one does.
CONTRIB_DEFECTS = {
    # Default rho = moving_rate / opt._learning_rate; AdamOptimizer keeps its rate in `_lr`.
    # (Both divide a float learning rate in Python: 0.3 / 0.02 is rho 15.0 in both.)
    "adam_default_period3": ("AttributeError", "_learning_rate", "adam_rho_spelled_out_period3"),
    # Contrib's getter tests `LOCAL_VARIABLES in collections`, and a slot variable made
    # inside its scope comes with collections=None.
    "readme_layout_momentum_period2": ("TypeError", "not iterable", "momentum_default_period2"),
}
NAMES = [scenario.name for scenario in SCENARIOS]
AGREED = [name for name in NAMES if name not in CONTRIB_DEFECTS]
SYNCHRONOUS = "two_workers_synchronous_nesterov_period2"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """All scenarios, run by contrib and by the package (once per pytest session)."""
    if skip_reason():
        pytest.skip(skip_reason())
    return run_oracle(tmp_path_factory)


def _without_restart(result):
    """`result` without what follows a worker restart (contrib's run ends before)."""
    scenario = BY_NAME[result["scenario"]]
    if not scenario.restart:
        return result
    return dict(result, steps=result["steps"][: len(scenario.schedule) + 1])


def _final(result, name):
    return array(result["steps"][len(BY_NAME[result["scenario"]].schedule)]["values"][name])


def test_scenario_program_is_python_3_7():
    # TensorFlow 1.15's interpreter runs it: no syntax newer than 3.7 (walrus, `X | Y`
    # types, parenthesized context managers, ...).
    source = pathlib.Path(contrib_scenarios.__file__).read_text(encoding="utf-8")
    ast.parse(source, feature_version=(3, 7))


def test_every_scenario_is_compared():
    assert set(CONTRIB_DEFECTS) <= set(NAMES)
    assert all(reference in AGREED for _, _, reference in CONTRIB_DEFECTS.values())
    assert len(NAMES) == len(set(NAMES))


@pytest.mark.parametrize("world", sorted(WORLDS))
@pytest.mark.parametrize("name", AGREED)
def test_every_variable_after_every_step_matches_contrib(oracle, name, world):
    ours = _without_restart(oracle.result(f"package-{world}", name))
    theirs = oracle.result("contrib", name)
    assert_trajectories_match(ours, theirs, f"{name} ({world})")
    # Exchanges went the way this world's session allows (tf_contrib_easgd/exchange/transport.py).
    assert ours["events"]["transport"] == [WORLDS[world]] * BY_NAME[name].workers
    # Not a vacuous comparison: training moved every worker copy away from its start.
    first, last = theirs["steps"][0]["values"], theirs["steps"][-1]["values"]
    moved = [key for key in first if key.endswith("model/b1") and key.startswith("worker")]
    assert moved
    for key in moved:
        assert (array(first[key]) != array(last[key])).any(), key


@pytest.mark.parametrize("world", sorted(WORLDS))
@pytest.mark.parametrize("name", AGREED)
def test_variable_names_collections_and_devices_match_contrib(oracle, name, world):
    # Per worker graph: the names in GLOBAL_VARIABLES, LOCAL_VARIABLES and
    # TRAINABLE_VARIABLES, each with its device as /job:J/task:T.
    ours = oracle.result(f"package-{world}", name)
    theirs = oracle.result("contrib", name)
    assert len(ours["graphs"]) == len(theirs["graphs"])
    for mine, reference in zip(ours["graphs"], theirs["graphs"], strict=True):
        assert mine["collections"] == reference["collections"], f"worker {reference['worker']}"
        assert reference["resource"] == [False]  # contrib: TF1's ref variables.
        assert mine["resource"] == [world == "tf2"]


@pytest.mark.parametrize("name", AGREED)
def test_global_step_counts_the_exchanges_of_all_workers(oracle, name):
    # global_step is incremented by each exchange only: worker w exchanges at its local
    # steps period, 2 * period, ..., so after the schedule it reads the sum over workers of
    # floor(steps of w / period). local_step counts each worker's own steps.
    scenario = BY_NAME[name]
    exchanges = sum(
        scenario.schedule.count(worker) // scenario.period for worker in range(scenario.workers)
    )
    for side in ("contrib", *(f"package-{world}" for world in sorted(WORLDS))):
        result = oracle.result(side, name)
        assert _final(result, "global_step") == exchanges, side
        for worker in range(scenario.workers):
            steps = scenario.schedule.count(worker)
            assert _final(result, f"worker{worker}:local_step") == steps, side


@pytest.mark.parametrize("world", sorted(WORLDS))
@pytest.mark.parametrize("name", AGREED)
def test_swapping_saver_writes_contrib_names_and_values(oracle, name, world):
    ours = oracle.result(f"package-{world}", name)["swapping_checkpoint"]
    theirs = oracle.result("contrib", name)["swapping_checkpoint"]
    # The centres under the original names (partitioned ones as one variable), as
    # contrib; and the global step, which contrib left out (contrib fix 7).
    assert sorted(theirs) == ["model/b1", "model/b2", "model/w1", "model/w2"]
    assert set(ours) - set(theirs) == {"global_step"}
    assert_values_match({key: ours[key] for key in theirs}, theirs, f"{name} swapping_saver")
    assert array(ours["global_step"]) == _final(
        oracle.result(f"package-{world}", name), "global_step"
    )


@pytest.mark.parametrize("world", sorted(WORLDS))
@pytest.mark.parametrize("name", sorted(CONTRIB_DEFECTS))
def test_where_contrib_fails_the_package_trains_as_contrib_meant(oracle, name, world):
    error_type, message, reference = CONTRIB_DEFECTS[name]
    theirs = oracle.result("contrib", name)
    assert theirs["error"] is not None, f"contrib no longer fails {name}"
    assert (theirs["error"]["type"], theirs["error"]["where"]) == (error_type, "build")
    assert message in theirs["error"]["message"]

    ours = oracle.result(f"package-{world}", name)
    assert ours["error"] is None, ours["error"]
    # What contrib computes for the same model when it can run it.
    meant = oracle.result("contrib", reference)
    assert_trajectories_match(ours, meant, f"{name} ({world}) against contrib's {reference}")
    assert [g["collections"] for g in ours["graphs"]] == [g["collections"] for g in meant["graphs"]]


@pytest.mark.parametrize("world", sorted(WORLDS))
def test_synchronous_start_and_a_restarted_worker(oracle, world):
    # Both start-ups pass the barrier together in both. Worker 1 restarted after the
    # barrier: contrib's start-up waits for tokens nobody sends again (here it ends with
    # DeadlineExceeded after the session's operation_timeout_in_ms); the package's passes
    # at once (contrib fix 9) and starts worker 1 from the centre.
    scenario = BY_NAME[SYNCHRONOUS]
    theirs = oracle.result("contrib", SYNCHRONOUS)
    ours = oracle.result(f"package-{world}", SYNCHRONOUS)
    assert theirs["events"]["start"] == {"0": "ok", "1": "ok"}
    assert ours["events"]["start"] == {"0": "ok", "1": "ok"}
    assert theirs["events"]["restart"] == "DeadlineExceededError"
    assert ours["events"]["restart"] == "ok"

    before, restarted, stepped = ours["steps"][len(scenario.schedule) :]
    assert restarted["worker"] is None and stepped["worker"] == 1
    values = restarted["values"]
    for variable in ("model/w1", "model/b1", "model/w2", "model/b2"):
        centre = values[f"global_center_variable/{variable}"]
        assert values[f"worker1:{variable}"] == centre, variable
        assert values[f"worker1:local_center_variable/{variable}"] == centre, variable
        assert values[f"worker0:{variable}"] == before["values"][f"worker0:{variable}"]
    assert array(values["worker1:local_step"]) == 0
    assert array(stepped["values"]["worker1:local_step"]) == 1
    assert array(stepped["values"]["global_step"]) == array(values["global_step"])


def test_largest_difference(oracle, capsys):
    # Goes over every comparison of this file and of test_checkpoint_compat.py again, so
    # the figure does not depend on which tests ran; docs/CONTRIB.md "Verified against the
    # original" quotes it.
    largest, where, pairs = 0.0, "nowhere", 0
    comparisons = [
        (f"{name} ({world})", _without_restart(oracle.result(f"package-{world}", name)), name)
        for name in AGREED
        for world in WORLDS
    ] + [
        (f"{name} ({world})", oracle.result(f"package-{world}", name), reference)
        for name, (_, _, reference) in CONTRIB_DEFECTS.items()
        for world in WORLDS
    ]
    triples = [(label, ours, oracle.result("contrib", ref)) for label, ours, ref in comparisons]
    for scenario in SCENARIOS:
        if scenario.checkpoints:
            triples += list(continuation_pairs(oracle, scenario.name))
    for label, ours, theirs in triples:
        difference, at = largest_difference(ours, theirs)
        pairs += 1
        if difference > largest:
            largest, where = difference, f"{label}, {at}"
    with capsys.disabled():
        print(
            f"\ncontrib oracle: {len(NAMES)} scenarios, {pairs} runs compared with contrib's "
            f"({len(CHECKPOINT_KINDS)} checkpoint kinds both ways, {len(WORLDS)} worlds); "
            f"largest difference {largest:.3g} ({where}); tolerance {ATOL:g}"
        )
        for rerun in contrib_oracle.RERUNS:
            print(f"contrib oracle: {rerun}")
    assert largest <= ATOL
