"""The strategies section's harness (benchmarks/strategies*.py, strategies_jobs.py,
strategy_task.py) on hand-made answers: parsing, picks, report rows and argument checks.

No server and no process: the jobs' outputs are written here as their tasks print them.
"""

import json

import pytest

from benchmarks import strategies, strategies_jobs, strategies_report
from benchmarks.common import report, strategy_task
from benchmarks.common.protocol import REPLY_PREFIX
from tf_contrib_easgd.trainer.progress import EVENT_PREFIX


def test_every_kind_names_its_processes_roles_and_cores():
    assert strategies_jobs.processes("mwms") == [
        ("worker0", "worker", "0"),
        ("worker1", "worker", "1"),
    ]
    assert strategies_jobs.processes("pss") == [
        ("ps0", "ps", "0,1"), ("worker0", "worker", "0"), ("worker1", "worker", "1"),
        ("chief", "chief", "0,1"),
    ]  # fmt: skip
    assert [name for name, _, _ in strategies_jobs.processes("callback")] == [
        "ps0", "worker0", "worker1",
    ]  # fmt: skip
    assert strategies_jobs.trainers("pss") == ["chief"]
    assert strategies_jobs.trainers("easgd-train") == ["worker0"]
    with pytest.raises(ValueError, match=r"kind must be one of .* got 'horovod'"):
        strategies_jobs.processes("horovod")


def test_a_pss_command_line_is_one_its_task_parses_back():
    addresses = {"ps0": "h1:2222", "worker0": "h2:2222", "worker1": "h3:2222", "chief": "h4:2222"}
    spec = strategies_jobs.cluster_spec("pss", addresses)
    assert spec == {"ps": ["h1:2222"], "worker": ["h2:2222", "h3:2222"], "chief": ["h4:2222"]}
    options = {"model": "cnn", "learning_rate": 0.1, "seconds": 15.0, "eval_secs": 0.5,
               "epoch_steps": 48, "steps_per_execution": 16}  # fmt: skip
    argv = strategies_jobs.argv("pss", "worker1", "worker", spec, options)
    assert argv[1:3] == ["-m", "benchmarks.common.strategy_task"]
    args = strategy_task.parse(argv[3:])
    assert (args.contender, args.role, args.index, args.cluster) == ("pss", "worker", 1, spec)
    assert (args.model, args.learning_rate, args.steps_per_execution) == ("cnn", 0.1, 16)
    assert (args.seconds, args.eval_secs, args.epoch_steps) == (15.0, 0.5, 48)
    assert not args.overlap and args.wire_dtype is None


def test_the_callback_command_line_carries_its_moving_rate_overlap_and_wire():
    spec = {"ps": ["a:1"], "worker": ["b:1", "c:1"]}
    options = {"model": "mlp", "learning_rate": 0.05, "seconds": 6.0, "overlap": True,
               "wire_dtype": "bfloat16", "moving_rate": 0.45}  # fmt: skip
    args = strategy_task.parse(strategies_jobs.argv("callback", "ps0", "ps", spec, options)[3:])
    assert (args.role, args.index, args.overlap, args.wire_dtype) == ("ps", 0, True, "bfloat16")
    assert args.moving_rate == 0.45


def test_every_callback_contender_names_its_moving_rate():
    # The callback's default moving rate is chosen from these runs, so no contender may
    # lean on the default: each says its own.
    callbacks = [c for c, (kind, _) in strategies.CONTENDERS.items() if kind == "callback"]
    assert callbacks and all("moving_rate" in strategies.CONTENDERS[c][1] for c in callbacks)
    assert set(callbacks) < set(strategies_report.EASGD)


def test_easgd_train_runs_in_task_mode_with_its_defaults_but_the_rate():
    spec = {"ps": ["a:1"], "worker": ["b:1", "c:1"]}
    options = {"model": "mlp", "learning_rate": 0.02, "seconds": 6.0, "model_dir": "/tmp/m"}
    argv = strategies_jobs.argv("easgd-train", "worker1", "worker", spec, options)
    assert argv[1:3] == ["-m", "tf_contrib_easgd.trainer"]
    assert {"--cluster=task", "--job_name=worker", "--task_index=1", "--ps_hosts=a:1",
            "--worker_hosts=b:1,c:1", "--learning_rate=0.02", "--model_dir=/tmp/m",
            "--progress_format=json"} <= set(argv)  # fmt: skip
    # Its defaults: no flag of the exchange, the optimizer or the batch is given.
    exchange = ("--overlap", "--wire_dtype", "--moving_rate", "--optimizer", "--batch_size")
    assert not [a for a in argv if a.split("=")[0] in exchange]


def test_only_pss_and_tf_keras_mwms_get_legacy_keras_and_only_pss_fail_fast():
    pss = strategies_jobs.environment("pss", {})
    assert pss["TF_USE_LEGACY_KERAS"] == "1" and pss["GRPC_FAIL_FAST"] == "use_caller"
    assert "TF_USE_LEGACY_KERAS" not in strategies_jobs.environment("mwms", {"keras": "keras3"})
    assert strategies_jobs.environment("mwms", {"keras": "tf-keras"})["TF_USE_LEGACY_KERAS"] == "1"
    callback = strategies_jobs.environment("callback", {})
    assert "TF_USE_LEGACY_KERAS" not in callback and "GRPC_FAIL_FAST" not in callback
    assert callback["TF_NUM_INTEROP_THREADS"] == strategies_jobs.INTEROP_THREADS


def _event(kind, task, time, **fields):
    return EVENT_PREFIX + json.dumps({"event": kind, "task": task, "time": time, **fields})


def test_easgd_train_events_give_the_centre_curve_rates_and_examples():
    chief = "\n".join([
        "some log line",
        _event("started", "worker 0", 100.0, startup_secs=3.0),
        _event("centre", "worker 0", 100.8, step=200, accuracy=0.95, loss=0.2),
        _event("progress", "worker 0", 101.0, step=400),
        _event("centre", "worker 0", 101.5, step=400, accuracy=0.975, loss=0.1),
    ])  # fmt: skip
    other = "\n".join([_event("started", "worker 1", 100.5),
                       _event("progress", "worker 1", 102.5, step=500)])  # fmt: skip
    result = strategies_jobs.easgd_train_result({"worker0": chief, "worker1": other, "ps0": ""})
    # Times from the chief's start: 100.8 - 100 = 0.8 s and 101.5 - 100 = 1.5 s.
    assert result["curve"] == [pytest.approx((0.8, 0.95, 200)), pytest.approx((1.5, 0.975, 400))]
    # worker 0: 400 steps in 101 - 100 = 1 s; worker 1: 500 steps in 102.5 - 100.5 = 2 s.
    assert result["rates"] == [pytest.approx(400.0), pytest.approx(250.0)]
    assert result["examples"] == (400 + 500) * 32 and result["t0"] == 100.0
    assert report.first_time_at(result["curve"], 0.97) == pytest.approx(1.5)


def test_replies_are_read_among_other_lines():
    text = f"noise\n{REPLY_PREFIX}{json.dumps({'ok': True, 'steps': 3})}\nmore noise\n"
    assert strategies_jobs.replies(text) == [{"ok": True, "steps": 3}]


def test_pss_shares_its_coordinators_steps_among_the_workers():
    # 960 steps in 16 s over 2 workers: 30 steps/s a worker; 960 x 32 examples.
    answer = {"curve": [[16.0, 0.97, 960]], "steps": 960, "secs": 16.0}
    pss = strategies_jobs.strategy_result("pss", [answer])
    assert pss == {"curve": [(16.0, 0.97, 960)], "rates": [30.0], "examples": 30720}
    # MWMS: each worker's own steps: 100 in 4 s and 100 in 5 s; worker 0 has the curve.
    answers = [{"curve": [[4.0, 0.9, 100]], "steps": 100, "secs": 4.0},
               {"curve": [], "steps": 100, "secs": 5.0}]  # fmt: skip
    mwms = strategies_jobs.strategy_result("mwms", answers)
    assert mwms == {"curve": [(4.0, 0.9, 100)], "rates": [25.0, 20.0], "examples": 6400}


def test_a_runs_summary_per_example_and_per_worker():
    run = {"examples": 10_000, "rates": [100.0, 300.0], "curve": [(1.0, 0.9, 10), (2.0, 0.98, 20)],
           "bytes": {"ps0": 2_500_000, "worker0": 1_000_000},
           "cpu": {"ps0": 1.0, "worker0": 2.0, "worker1": 2.0}}  # fmt: skip
    figures = strategies.summary(run)
    # (100 + 300) / 2 = 200 steps/s a worker x 32 = 6400 examples/s; 2.5 MB / 10,000
    # examples = 250 B; 1 MB / 10,000 = 100 B; 5 CPU s / 10,000 examples = 0.5 ms an
    # example, 50 ms per 100; 0.98 >= 0.97 first at 2 s.
    assert figures == {"examples_per_sec": 6400.0, "ps_bytes": 250.0, "worker_bytes": 100.0,
                       "cpu_ms": pytest.approx(50.0), "time": 2.0, "final": 0.98}  # fmt: skip
    mwms = strategies.summary(dict(run, bytes={"worker0": 500_000}, curve=[(1.0, 0.5, 1)]))
    assert (mwms["ps_bytes"], mwms["worker_bytes"], mwms["time"]) == (None, 50.0, None)


def test_training_cpu_counts_from_the_first_sample_at_the_start():
    samples = [(9.5, {"ps0": 4.0, "worker0": 6.0}), (10.0, {"ps0": 4.5, "worker0": 6.5}),
               (10.5, {"ps0": 5.0, "worker0": 7.5}), (11.0, {"ps0": 5.75})]  # fmt: skip
    # From 10.0 on: ps0 5.75 - 4.5 = 1.25 s; worker0 (gone after 10.5) 7.5 - 6.5 = 1.0 s.
    assert strategies_jobs.training_cpu(samples, 10.0) == {"ps0": 1.25, "worker0": 1.0}
    assert strategies_jobs.training_cpu(samples, None) == {}


def test_the_pick_is_the_least_median_time_never_reached_counting_as_slowest():
    low, mid, high = {"learning_rate": 0.02}, {"learning_rate": 0.05}, {"learning_rate": 0.1}
    # Medians: 0.02 -> 3.0; 0.05 -> (2.0 + 4.0) / 2 = 3.0 (a tie: the first wins);
    # 0.1 -> [1.0, None, None] sorted with None last: None, never reached.
    tried = [(low, [3.0]), (mid, [2.0, 4.0]), (high, [1.0, None, None])]
    assert strategies.pick(tried) is low
    assert strategies.pick([(low, [5.0]), (mid, [1.0, 2.0, 9.0])]) is mid  # Median 2.0.
    assert strategies.pick([(low, [None]), (mid, [None])]) is None


def test_candidates_pss_spe_crosses_the_grids():
    assert strategies.candidates("mwms", (0.05, 0.1)) == [
        {"learning_rate": 0.05}, {"learning_rate": 0.1},
    ]  # fmt: skip
    spe = strategies.candidates("pss-spe", (0.05,))
    assert spe == [{"learning_rate": 0.05, "steps_per_execution": s} for s in strategies.SPE_GRID]
    with pytest.raises(ValueError, match="contender must be one of .* got 'sync'"):
        strategies.candidates("sync", (0.05,))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((["pss", "horovod"], ["loopback"], ["mlp"], 1, 5.0), "contenders must be"),
        ((["pss"], [], ["mlp"], 1, 5.0), "networks must be"),
        ((["pss"], ["loopback"], ["resnet"], 1, 5.0), "models must be .*'resnet'"),
        ((["pss"], ["loopback"], ["mlp"], 0, 5.0), "repeats must be an int >= 1, got 0"),
        ((["pss"], ["loopback"], ["mlp"], 1, "5"), "seconds must be a number > 0, got '5'"),
    ],
)
def test_bad_settings_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        strategies.check_settings(*arguments)


@pytest.mark.parametrize("flag", ["--seconds=0", "--learning_rate=-0.1", "--epoch_steps=0"])
def test_the_task_refuses_values_that_are_not_positive(flag, capsys):
    with pytest.raises(SystemExit):
        strategy_task.parse(["--contender=pss", "--role=chief", "--cluster={}", flag])
    assert flag.split("=")[0] in capsys.readouterr().err


def test_the_last_error_line_of_a_traceback():
    text = "Traceback\n  File x\nValueError: Attempt to convert a value (PerReplica:{\n  more"
    assert strategies.last_error(text) == "ValueError: Attempt to convert a value (PerReplica:{"
    assert strategies.last_error("all is well") == ""


def _run(rate, time, final, ps=None, load=1.0):
    return {"examples_per_sec": rate, "ps_bytes": ps, "worker_bytes": 100.0, "time": time,
            "final": final, "load": load, "cpu_ms": 40.0}  # fmt: skip


def _results():
    cells = {
        "1gbit": {
            "pss": [_run(800, 6.0, 0.97, 2800), _run(900, 4.0, 0.975, 2800)],
            "mwms": [_run(1000, 5.0, 0.972), _run(1100, None, 0.96)],
            "callback-a0.45": [_run(7000, 2.0, 0.968, 260), _run(6000, 1.5, 0.97, 260)],
        }
    }
    lr = {"learning_rate": 0.05}
    picks = {c: {"tried": [(lr, [1.0])], "chosen": lr} for c in cells["1gbit"]}
    return {"cells": {"mlp": cells}, "picks": {"mlp": picks}}


def test_rows_give_medians_and_ratios_against_the_best_tf_strategy():
    rows = {row[1]: row for row in strategies_report.rows(_results(), "mlp")}
    # Medians: pss 850 examples/s, (6 + 4) / 2 = 5.0 s; mwms 1050, [5.0, None] -> None
    # (a run short of 97 % is infinitely slow). The best TF: 1050 examples/s, 5.0 s.
    assert rows["pss"][3:5] == ["850", "0.81"]  # 850 / 1050.
    assert rows["pss"][7] == "40.0"
    assert rows["pss"][8:11] == ["6.0, 4.0", "5.0", "1.00"]
    assert rows["mwms"][8:11] == ["5.0, -", "-", "-"]
    # callback: 6500 / 1050 = 6.19; (2.0 + 1.5) / 2 = 1.75 -> 1.75 / 5.0 = 0.35.
    assert rows["callback-a0.45"][3:5] == ["6500", "6.19"]
    assert rows["callback-a0.45"][5] == "260" and rows["callback-a0.45"][10] == "0.35"


def test_targets_judge_easgd_against_the_best_strategy_and_its_noise():
    (time, final) = strategies_report.targets(_results())
    # EASGD 1.75 s <= 0.5 x 5.0 s: met.
    assert time[1] == "1.8 s; TF 5.0 s" and time[2] is True
    # TF finals 0.97, 0.975, 0.972, 0.96: median 0.971, noise 0.975 - 0.96 = 0.015; EASGD's
    # median (0.968 + 0.97) / 2 = 0.969: 0.002 short, within the noise.
    assert final[1] == "0.969 against 0.971" and final[2] is True


def test_the_block_is_written_between_its_markers_and_kept(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\nother sections\n")
    block = f"{strategies_report.BEGIN}\nfigures\n{strategies_report.END}\n"
    report.write_generated_block(path, path, strategies_report.BEGIN, strategies_report.END, block)
    assert path.read_text().startswith("# Benchmarks\n\nother sections\n")
    assert strategies_report.kept_block(path) == block
    assert strategies_report.kept_block(tmp_path / "missing.md") == ""
