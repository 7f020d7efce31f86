"""The chaos soak (soak/): its schedule, its measures on events made by hand, and a short run.

The unit tests need no processes: a schedule is a pure function of its seed, and a fault's
cost and checks are pure functions of the tasks' events, written here by hand with the
figures worked out in comments; the comparison of checkpoints after a ps restart reads
small checkpoints written here. tests/e2e/test_soak_e2e.py runs the soak's runner on a
three-fault schedule (a worker killed and restarted, the ps frozen, a worker's link cut)
with 1 ps and 2 workers in network namespaces, as `make soak` does with 20-odd faults;
it needs root and skips without.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from soak import checks, digest, measure, report, stacks
from soak import schedule as schedule_module
from soak.schedule import CUT, FREEZE, KILL_CHIEF, KILL_PS, KILL_WORKER, Fault
from tf_contrib_easgd.trainer import export, stall

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_seed_gives_one_schedule():
    first = schedule_module.make_schedule(seed=3, faults=22, workers=3)
    assert first == schedule_module.make_schedule(seed=3, faults=22, workers=3)
    assert first != schedule_module.make_schedule(seed=4, faults=22, workers=3)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("workers", [2, 3])
def test_a_schedule_has_every_kind_spread_over_the_training(seed, workers):
    faults = schedule_module.make_schedule(seed, faults=20, workers=workers)
    assert len(faults) == 20
    assert [fault.index for fault in faults] == list(range(20))
    assert {fault.kind for fault in faults} == set(schedule_module.KINDS)
    # Each fault in its own twentieth of [0.05, 0.85] (0.04 each), between 0.2 and 0.8
    # of it: at least 0.4 * 0.04 = 0.016 apart, in order.
    fractions = [fault.at_fraction for fault in faults]
    assert fractions[0] > 0.05 and fractions[-1] < 0.85
    assert all(b - a >= 0.016 - 1e-9 for a, b in zip(fractions, fractions[1:], strict=False))
    tasks = {"ps 0", *schedule_module.worker_names(workers)}
    for fault in faults:
        assert fault.target in tasks
        assert 1 <= fault.settle_secs <= 3
        if fault.kind == FREEZE:
            assert 3 <= fault.duration_secs <= 8
        elif fault.kind == CUT:
            assert 6 <= fault.duration_secs <= 12
        else:
            assert fault.duration_secs == 0
    assert {f.target for f in faults if f.kind == KILL_WORKER} <= tasks - {"ps 0", "worker 0"}
    assert {f.target for f in faults if f.kind == KILL_CHIEF} == {"worker 0"}
    assert {f.target for f in faults if f.kind == KILL_PS} == {"ps 0"}
    # The soak's checks accept every schedule it makes (cuts >= 6 s, stall reports at 3 s).
    schedule_module.check_schedule(faults, workers, stall_report_secs=3)


def test_one_ps_keeps_the_schedules_of_before():
    # The documented soak (seed 0, 3 workers, 20 faults) as it ran before --ps existed:
    # the ps argument's default draws nothing more from the seed's generator.
    faults = schedule_module.make_schedule(seed=0, faults=20, workers=3)
    assert faults == schedule_module.make_schedule(seed=0, faults=20, workers=3, ps=1)
    assert [(fault.kind, fault.target) for fault in faults[:8]] == [
        (KILL_PS, "ps 0"),
        (KILL_CHIEF, "worker 0"),
        (KILL_WORKER, "worker 2"),
        (CUT, "worker 2"),
        (FREEZE, "worker 2"),
        (CUT, "ps 0"),
        (KILL_PS, "ps 0"),
        (CUT, "worker 2"),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_two_ps_are_restarted_in_turn_and_both_can_be_hit(seed):
    faults = schedule_module.make_schedule(seed, faults=20, workers=3, ps=2)
    # Every kind once and KILL_PS once more (one per ps) come first: 6 kinds among the
    # first 6 faults, so at least 2 ps restarts, which alternate: ps 0 and ps 1 both.
    assert sorted(fault.kind for fault in faults[:6]) == sorted([*schedule_module.KINDS, KILL_PS])
    restarted = [fault.target for fault in faults if fault.kind == KILL_PS]
    assert len(restarted) >= 2
    assert all(a != b for a, b in zip(restarted, restarted[1:], strict=False))
    tasks = {"ps 0", "ps 1", "worker 0", "worker 1", "worker 2"}
    assert {fault.target for fault in faults} <= tasks
    schedule_module.check_schedule(faults, 3, stall_report_secs=3, ps=2)
    with pytest.raises(ValueError, match="no such task in a job of 1 ps"):
        schedule_module.check_schedule(faults, 3, stall_report_secs=3, ps=1)


def test_two_ps_of_one_seed_start_from_a_drawn_ps():
    # Seed 5, 8 faults, 2 workers: the 6 first kinds shuffled, 2 more drawn; the ps
    # restarts are the 4th and 5th faults, from ps 0 then ps 1.
    faults = schedule_module.make_schedule(seed=5, faults=8, workers=2, ps=2)
    assert [(fault.kind, fault.target) for fault in faults] == [
        (KILL_CHIEF, "worker 0"),
        (KILL_WORKER, "worker 1"),
        (FREEZE, "worker 1"),
        (KILL_PS, "ps 0"),
        (KILL_PS, "ps 1"),
        (CUT, "ps 1"),
        (CUT, "worker 1"),
        (CUT, "ps 1"),
    ]


@pytest.mark.parametrize("ps", [0, 3, True, 2.0, "2"])
def test_a_bad_number_of_ps_is_named(ps):
    with pytest.raises(ValueError, match=rf"ps must be 1 or 2 \(parameter servers\), got {ps!r}"):
        schedule_module.make_schedule(seed=0, faults=5, workers=2, ps=ps)
    with pytest.raises(ValueError, match="ps must be 1 or 2"):
        schedule_module.check_schedule([], workers=2, stall_report_secs=3, ps=ps)


def test_a_kill_of_a_ps_names_both_ps_of_a_job_of_two():
    with pytest.raises(ValueError, match=r"that kind hits \['ps 0', 'ps 1'\]"):
        schedule_module.check_schedule(
            [Fault(0, KILL_PS, "worker 1")], workers=2, stall_report_secs=3, ps=2
        )


def test_a_short_schedule_takes_kinds_without_repeating_one():
    faults = schedule_module.make_schedule(seed=0, faults=3, workers=2)
    assert len({fault.kind for fault in faults}) == 3


def test_fault_and_schedule_checks_name_what_is_wrong():
    with pytest.raises(ValueError, match="duration_secs must be 0 for a kill"):
        Fault(0, KILL_PS, "ps 0", duration_secs=3)
    with pytest.raises(ValueError, match="> 0 for a freeze"):
        Fault(0, FREEZE, "ps 0")
    with pytest.raises(ValueError, match="kind must be one of"):
        Fault(0, "reboot", "ps 0")
    cases = [
        ([Fault(0, FREEZE, "worker 2", 3.0)], "no such task in a job of 1 ps and 2 workers"),
        ([Fault(0, KILL_PS, "ps 1")], "no such task in a job of 1 ps and 2 workers"),
        ([Fault(0, KILL_WORKER, "worker 0")], "that kind hits"),
        ([Fault(0, CUT, "worker 1", 4.0)], "too short for --stall_report_secs=3"),
        (
            [Fault(0, FREEZE, "ps 0", 3.0, 0.5), Fault(1, FREEZE, "ps 0", 3.0, 0.4)],
            "at_fraction 0.4 < the previous",
        ),
    ]
    for faults, message in cases:
        with pytest.raises(ValueError, match=message):
            schedule_module.check_schedule(faults, workers=2, stall_report_secs=3)


def _event(time_, task, kind, **fields):
    return {"time": time_, "task": task, "event": kind, **fields}


def _progress(time_, task, step, exchanges=0):
    return _event(time_, task, "progress", step=step, exchanges=exchanges)


def _injection(kind, target, injected, ended, duration=0.0, **extra):
    fault = Fault(0, kind, target, duration)
    return {"fault": fault.to_dict(), "injected": injected, "ended": ended, **extra}


def test_the_rejoin_delay_is_the_trainers():
    assert measure.REJOIN_AFTER_SECS == stall.REJOIN_AFTER_SECS


def test_bounds_of_each_kind():
    bounds = measure.Bounds(startup_secs=30, slack_secs=60)
    assert bounds.of(KILL_WORKER, 0) == bounds.of(KILL_CHIEF, 0) == bounds.of(KILL_PS, 0) == 30
    assert bounds.of(FREEZE, 6.5) == 6.5
    # A cut of 10 s, the 5 s a step may still wait, 1.5 s to notice, a start-up of 30 s.
    assert bounds.of(CUT, 10) == 10 + 5 + 1.5 + 30


def test_lost_exchanges_allowed_per_ps_restart():
    # 2000 chief steps between checkpoints, period 10: 200 chief exchanges; each of 3
    # workers up to 1.5 times that (300), and 2 each in flight: 900 + 6.
    assert measure.allowed_lost_exchanges(2000, 10, 3) == 906
    # 1000 / 10 = 100 -> 150 per worker, 2 workers: 300 + 4.
    assert measure.allowed_lost_exchanges(1000, 10, 2) == 304


# Worker 1 killed at t=100 and restarted at 100.2; it last reported step 1300 at 99.5.
KILLED = [
    _progress(99.0, "worker 0", 4000),
    _progress(99.5, "worker 1", 1300),
    _progress(101.0, "worker 0", 4100),  # The chief goes on...
    _event(120.0, "worker 1", "started", step=1350),  # ...worker 1 is back 19.8 s later...
    _progress(120.5, "worker 1", 1400),
    _progress(121.0, "worker 0", 9000),  # ...and the chief still trains after that.
]


def test_a_restart_costs_until_every_worker_trained_after_it():
    recovered, back = measure.recovery(KILLED, 2, injected=100.0, ended=100.2)
    # The anchor is worker 1's "started" at 120: the chief's report at 101 does not count.
    assert back == {"worker 1": 120.5, "worker 0": 121.0}
    assert recovered == 121.0
    result = measure.assess(
        KILLED, _injection(KILL_WORKER, "worker 1", 100.0, 100.2), 2, measure.Bounds(), 304
    )
    assert result["cost_secs"] == pytest.approx(21.0)  # 121 - 100.
    assert result["bound_secs"] == 40
    assert result["problems"] == []
    assert "w1 resumed at step 1350 (reported 1300)" in result["notes"]


def test_a_worker_that_hangs_once_another_is_back_is_stuck():
    # The chief's last report is before worker 1's new session: it never trained after.
    events = KILLED[:5]
    assert measure.recovery(events, 2, injected=100.0, ended=100.2)[0] is None
    result = measure.assess(
        events, _injection(KILL_WORKER, "worker 1", 100.0, 100.2), 2, measure.Bounds(), 304
    )
    assert result["cost_secs"] is None
    assert result["problems"] == ["not every worker reported progress again: stuck (bound 40 s)"]
    # And the soak's watchdog sees it: at t=200 the chief has been silent for 99 s.
    assert measure.silence(events, 2, now=200.0) == {"worker 0": 99.0, "worker 1": 79.5}


def test_a_cost_beyond_bound_and_slack_is_a_stuck_task():
    events = [*KILLED[:5], _progress(195.0, "worker 0", 9000)]
    result = measure.assess(
        events,
        _injection(KILL_WORKER, "worker 1", 100.0, 100.2),
        2,
        measure.Bounds(startup_secs=30, slack_secs=60),
        304,
    )
    # 95 s > 30 + 60.
    assert result["cost_secs"] == pytest.approx(95.0)
    assert result["problems"] == [
        "stuck: back after 95.0 s, more than 60 s beyond the bound (30.0 s)"
    ]


def test_a_restart_below_the_reported_step_loses_work():
    events = [*KILLED[:3], _event(120.0, "worker 1", "started", step=1200), *KILLED[4:]]
    result = measure.assess(
        events, _injection(KILL_WORKER, "worker 1", 100.0, 100.2), 2, measure.Bounds(), 304
    )
    assert result["problems"] == [
        "worker 1 resumed at step 1200, below the 1300 it had reported: work whose "
        "exchanges reached the centre was lost"
    ]


def test_a_finished_worker_counts_as_back():
    events = [
        _event(90.0, "worker 1", "done", steps=5000),
        _progress(104.0, "worker 0", 4900),
    ]
    # Worker 1 waits for the end (done at 90); the chief's freeze ended at 103.
    assert measure.recovery(events, 2, injected=98.0, ended=103.0) == (
        104.0,
        {"worker 0": 104.0},
    )
    assert measure.silence(events, 2, now=110.0) == {"worker 0": 6.0}


def test_a_worker_that_finishes_during_a_fault_counts_as_back():
    # The chief finishes (done at 110) while worker 1 restarts; worker 1's new session at
    # 120 sets the anchor, after which only worker 1 reports.
    events = [
        *KILLED[:3],
        _event(110.0, "worker 0", "done", steps=5000),
        _event(120.0, "worker 1", "started", step=1350),
        _progress(120.5, "worker 1", 1400),
    ]
    assert measure.recovery(events, 2, injected=100.0, ended=100.2) == (
        120.5,
        {"worker 1": 120.5},
    )


def test_a_finished_worker_whose_ps_was_restored_counts_as_back():
    # Worker 1 finished its 5000 steps (done at 90); ps 0 killed at 98, restored from a
    # checkpoint that holds worker 1's count 5000. Worker 1's new session starts at step
    # 5000 (at 106), trains nothing and reports no more "progress" or "done": it is
    # finished. The chief's new session at 105 and its progress at 108: back at 108, the
    # anchor being worker 1's "started" at 106.
    events = [
        _event(89.0, "worker 1", "progress", step=5000, steps=5000),
        _event(90.0, "worker 1", "done", steps=5000),
        _event(105.0, "worker 0", "started", step=4000),
        _event(106.0, "worker 1", "started", step=5000),
        _event(108.0, "worker 0", "progress", step=4100, steps=5000),
    ]
    assert measure.recovery(events, 2, injected=98.0, ended=98.3) == (108.0, {"worker 0": 108.0})
    # Nor is it silent at 170: only the chief, 62 s after its last report, is.
    assert measure.silence(events, 2, now=170.0) == {"worker 0": 62.0}
    # A worker whose new session starts below its steps still has to train: not back.
    below = [*events[:3], _event(106.0, "worker 1", "started", step=4990), events[4]]
    assert measure.recovery(below, 2, injected=98.0, ended=98.3) == (None, {"worker 0": 108.0})


# The ps killed at t=100, restarted at 100.3. Before: the chief reported 500 exchanges,
# worker 1 520; the chief's new session restored model.ckpt-400 (global_step 401).
PS_RESTART = [
    _progress(98.0, "worker 0", 2500, exchanges=500),
    _progress(99.0, "worker 1", 2600, exchanges=520),
    _event(
        111.0,
        "worker 0",
        "started",
        step=2000,
        restored_from="model.ckpt-400",
        restored_global_step=401,
        restored_centre_sha256="ab" * 32,
    ),
    _event(112.0, "worker 1", "started", step=2010),
    _progress(113.0, "worker 0", 2100, exchanges=420),
    _progress(114.5, "worker 1", 2100, exchanges=425),
]


def test_a_ps_restart_loses_the_exchanges_since_the_checkpoint():
    injection = _injection(KILL_PS, "ps 0", 100.0, 100.3, digest={"ok": True, "detail": ""})
    result = measure.assess(PS_RESTART, injection, 2, measure.Bounds(), 304)
    # Back when both trained after worker 1's new session (112): 114.5 - 100.
    assert result["cost_secs"] == pytest.approx(14.5)
    # At least 520 exchanges before the kill, 401 restored: 119 lost, within 304.
    assert result["lost"] == 119
    assert result["problems"] == []
    assert result["notes"][:3] == [
        "restored model.ckpt-400 (global_step 401 of >= 520)",
        "digest equal",
        "steps w0 2500->2000, w1 2600->2010",
    ]


def test_a_ps_restart_beyond_one_interval_or_with_another_centre_fails():
    injection = _injection(
        KILL_PS, "ps 0", 100.0, 100.3, digest={"ok": False, "detail": "sha256 12 (event: ab)"}
    )
    result = measure.assess(PS_RESTART, injection, 2, measure.Bounds(), 100)
    assert result["problems"] == [
        "lost 119 exchanges, more than one checkpoint interval's 100",
        "the restored centre differs from the checkpoint: sha256 12 (event: ab)",
    ]
    # No restore at all: the ps came back empty, or kept nothing the chief knew of.
    unrestored = [dict(e, restored_from=None) if e["event"] == "started" else e for e in PS_RESTART]
    result = measure.assess(unrestored, injection, 2, measure.Bounds(), 304)
    assert result["problems"] == [
        "the chief's new session did not restore the centre from a checkpoint"
    ]


# A job of 2 ps: ps 0 holds the kernels, ps 1 the biases (as easgd-train's mlp puts them).
TWO_PS_MOVES = {
    "ps 0": {"variables": 2, "moved": 2, "max_change": 0.0213},
    "ps 1": {"variables": 2, "moved": 2, "max_change": 0.0031},
}


def test_a_ps_restart_notes_that_every_ps_trained_on():
    # ps 1 restarted; the restore set both ps back to model.ckpt-400; by the next
    # checkpoint all 4 centre variables had changed, on the ps not restarted too.
    injection = _injection(
        KILL_PS, "ps 1", 100.0, 100.3, digest={"ok": True, "detail": ""}, moves=TWO_PS_MOVES
    )
    result = measure.assess(PS_RESTART, injection, 2, measure.Bounds(), 304)
    assert result["problems"] == []
    assert result["lost"] == 119  # 520 - 401, as with one ps.
    assert (
        "centres changed by the next checkpoint: ps0 (not restarted) 2/2, max change "
        "0.0213, ps1 2/2, max change 0.0031"
    ) in result["notes"]


def test_a_ps_whose_centres_did_not_train_on_is_a_problem():
    still = dict(TWO_PS_MOVES, **{"ps 0": {"variables": 2, "moved": 1, "max_change": 0.01}})
    injection = _injection(
        KILL_PS, "ps 1", 100.0, 100.3, digest={"ok": True, "detail": ""}, moves=still
    )
    result = measure.assess(PS_RESTART, injection, 2, measure.Bounds(), 304)
    assert result["problems"] == [
        "ps 0's centres did not train on after the restore: 1 of 2 changed by the next checkpoint"
    ]
    for moves, why in [
        ({"error": "no checkpoint newer than the restored one was copied"}, "no checkpoint"),
        ({}, "the chief named no ps of the centre"),
    ]:
        injection = dict(injection, moves=moves)
        [problem] = measure.assess(PS_RESTART, injection, 2, measure.Bounds(), 304)["problems"]
        assert problem.startswith("whether the centres trained on after the restore is unknown")
        assert why in problem


def test_one_check_sums_up_the_ps_restarts():
    good = _injection(KILL_PS, "ps 1", 100.0, 100.3, digest={"ok": True, "detail": ""})
    good = dict(good, moves=TWO_PS_MOVES)
    good["fault"]["index"] = 3
    result = measure.assess(PS_RESTART, good, 2, measure.Bounds(), 304)
    codes = {"ps 0": 0, "ps 1": 0, "worker 0": 0, "worker 1": 0}
    # 2 workers * 8000 steps / 10 = 1600 exchanges asked; 1601 within 2 per fault.
    found = checks.check_job(
        _summary(exchanges=1601), [(good, result)], _check_config(faults=1), codes
    )
    assert [check.name for check in found][-1] == (
        "ps restarts: lost <= 1 interval, every ps trained on"
    )
    assert found[-1].ok
    assert found[-1].detail == "#3 ps1: lost 119, centres changed after ps0 2/2, ps1 2/2"
    bad = dict(good, moves=dict(TWO_PS_MOVES, **{"ps 0": {**TWO_PS_MOVES["ps 0"], "moved": 0}}))
    result = measure.assess(PS_RESTART, bad, 2, measure.Bounds(), 304)
    found = checks.check_job(
        _summary(exchanges=1601), [(bad, result)], _check_config(faults=1), codes
    )
    assert not found[-1].ok
    assert (
        found[-1].detail
        == "#3 ps1: lost 119, centres changed after ps0 0/2, ps1 2/2 (1 problem(s))"
    )
    # No ps restart, no such check.
    plain = checks.check_job(_summary(), [], _check_config(faults=0), codes)
    assert all(not check.name.startswith("ps restarts") for check in plain)


def test_a_cut_notes_the_stall_and_the_rejoin():
    # Worker 1's link cut at 100 for 10 s; its step stalled at 103, was still stuck 5 s
    # after the link came back, and the process restarted itself.
    events = [
        _progress(99.8, "worker 1", 3000),
        _progress(100.5, "worker 0", 3500),
        _event(103.5, "worker 1", "stalled", step=3005, secs=3.5, unreachable=["10.213.0.1:2222"]),
        _event(116.0, "worker 1", "rejoining", step=3005, secs=16.0, back_secs=5.0),
        _event(130.0, "worker 1", "started", step=3000),
        _progress(130.4, "worker 1", 3100),
        _progress(130.6, "worker 0", 9000),
    ]
    injection = _injection(CUT, "worker 1", 100.0, 110.0, duration=10.0)
    result = measure.assess(events, injection, 2, measure.Bounds(), 304)
    assert result["cost_secs"] == pytest.approx(30.6)  # Both trained after 130: 130.6 - 100.
    assert result["bound_secs"] == pytest.approx(56.5)  # 10 + 5 + 1.5 + 40.
    assert result["notes"] == [
        "w1 rejoined",
        "w1 resumed at step 3000 (reported 3000)",
        "stalled w1",
    ]
    assert result["problems"] == []


def _save_centre(saver, session, model_dir, step):
    """Saves `model.ckpt-<step>` as the chief does; `checkpoint` then names it."""
    return saver.save(session, os.path.join(model_dir, "model.ckpt"), global_step=step)


def test_the_centre_after_a_restore_is_compared_per_ps(tmp_path, world):
    del world  # Ref variables in TF1 mode, resource variables in TF 2 graph mode.
    model_dir, copies = str(tmp_path / "model"), str(tmp_path / "restored")
    names = {
        "ps 0": ["global_center_variable/kernel"],
        "ps 1": ["global_center_variable/bias"],
    }
    with tf.Graph().as_default():
        kernel = tf.compat.v1.get_variable(
            "global_center_variable/kernel", initializer=[[1.0, 2.0]]
        )
        bias = tf.compat.v1.get_variable("global_center_variable/bias", initializer=[0.0, 0.0])
        step = tf.compat.v1.get_variable("global_step", initializer=np.int64(40))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            _save_centre(saver, session, model_dir, 40)
            restored = {"global_center_variable/kernel": session.run(kernel)}
            restored["global_center_variable/bias"] = session.run(bias)
            restores = digest.Restores(model_dir, copies)
            # The chief restored model.ckpt-40 at t=10: its event, as worker.py reports it.
            started = {
                "time": 10.0,
                "restored_from": "model.ckpt-40",
                "restored_global_step": 40,
                "restored_centre_sha256": export.centre_digest(restored),
                "centre_ps": names,
            }
            restores.add(started)
            restores.copy_later()  # Nothing newer than model.ckpt-40 yet.
            assert restores.restores[0]["later"] is None
            assert digest.newer_checkpoint(model_dir, "model.ckpt-40") is None
            # Training on: the kernel's second element 2.0 -> 2.5; the bias stays 0.
            session.run([kernel.assign([[1.0, 2.5]]), step.assign(52)])
            _save_centre(saver, session, model_dir, 52)
            restores.copy_later()
            assert restores.restores[0]["later"] == os.path.join(copies, "0-later", "model.ckpt-52")
    # Fault injected at t=5, ended at t=6: the restore at t=10 is its.
    result = restores.assess_after(6.0)
    assert result["digest"]["ok"], result["digest"]
    assert result["moves"] == {
        "ps 0": {"variables": 1, "moved": 1, "max_change": 0.5},  # |2.5 - 2.0|.
        "ps 1": {"variables": 1, "moved": 0, "max_change": 0.0},
    }
    assert restores.assess_after(10.0) == {"digest": None, "moves": None}  # No later restore.
    # The copies outlive the chief's deletion of old checkpoints.
    for path in os.listdir(model_dir):
        os.remove(os.path.join(model_dir, path))
    assert restores.assess_after(6.0)["moves"]["ps 0"]["moved"] == 1
    assert digest.moves_by_ps(restores.restores[0]["prefix"], None, names) == {
        "error": "no checkpoint newer than the restored one was copied"
    }
    missing = {"ps 0": ["global_center_variable/other"]}
    assert digest.moves_by_ps(
        restores.restores[0]["prefix"], restores.restores[0]["later"], missing
    ) == {"error": "global_center_variable/other of ps 0 is not in both checkpoints"}


def test_a_newer_checkpoint_is_read_from_the_index_file(tmp_path):
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "model.ckpt-120"\nall_model_checkpoint_paths: "model.ckpt-120"\n'
    )
    assert digest.newer_checkpoint(str(tmp_path), "model.ckpt-80") == "model.ckpt-120"
    assert digest.newer_checkpoint(str(tmp_path), "model.ckpt-120") is None
    assert digest.newer_checkpoint(str(tmp_path / "none"), "model.ckpt-80") is None
    (tmp_path / "checkpoint").write_text("half a line")  # Being replaced: look again later.
    assert digest.newer_checkpoint(str(tmp_path), "model.ckpt-80") is None


def test_start_ups_are_first_sessions_of_fresh_processes():
    events = [
        _event(10.0, "worker 0", "started", startup_secs=9.0, recoveries=0),
        _event(50.0, "worker 0", "started", startup_secs=49.0, recoveries=1),  # A recovery.
        _event(60.0, "worker 1", "rejoining", step=300),
        # The same process after its exec: its start-up counts from the re-execution.
        _event(75.0, "worker 1", "started", startup_secs=14.0, recoveries=0),
        _event(90.0, "worker 1", "started", startup_secs=12.0, recoveries=0),  # A restart.
    ]
    assert measure.startups(events) == [9.0, 14.0, 12.0]


def test_the_sampler_dumps_a_silent_worker_once_per_interval(tmp_path):
    # `echo` stands in for py-spy: the dump file gets its arguments.
    sampler = stacks.StackSampler(str(tmp_path), shutil.which("echo"), after_secs=8, every_secs=10)
    sampler.sample({"worker 0": 9.0, "worker 1": 2.0}, {"worker 0": 123, "worker 1": 124})
    sampler.sample({"worker 0": 9.5}, {"worker 0": 123})  # Dumped less than 10 s ago.
    sampler.close()
    [dump] = sampler.dumps
    assert os.path.basename(dump).endswith("-worker0.txt")
    with open(dump, encoding="utf-8") as file:
        assert file.read() == "worker 0, silent for 9.0 s\ndump --pid 123\n"
    assert stacks.StackSampler(str(tmp_path), "").py_spy == ""  # Never dumps.


def _check_config(**changes):
    config = {
        "faults": 3,
        "workers": 2,
        "steps": 8000,
        "communication_period": 10,
        "min_accuracy": 0.95,
    }
    return dict(config, **changes)


def _summary(**changes):
    summary = {
        "test_accuracy": 0.97,
        "local_steps": {"0": 8000, "1": 8000},
        "unfinished_workers": [],
        "exchanges": 1602,
    }
    return dict(summary, **changes)


def test_the_checks_of_the_job():
    assessed = [({"fault": {"index": i}}, {"problems": []}) for i in range(3)]
    codes = {"ps 0": 0, "worker 0": 0, "worker 1": 0}
    found = checks.check_job(_summary(), assessed, _check_config(), codes)
    assert all(check.ok for check in found), found
    # 1602 exchanges for 2 * 8000 / 10 = 1600 asked: +2, within 2 per fault.
    assert found[4].detail == "1602 for 1600 asked (+2)"

    def failed(summary, config=None, exit_codes=codes, faults=assessed):
        found = checks.check_job(summary, faults, config or _check_config(), exit_codes)
        return [check.name for check in found if not check.ok]

    assert failed(_summary(test_accuracy=0.94)) == ["centre test accuracy"]
    assert failed(_summary(local_steps={"0": 8000, "1": 7990})) == ["work asked == work done"]
    assert failed(_summary(unfinished_workers=[1])) == ["work asked == work done"]
    assert failed(_summary(exchanges=1593)) == ["exchanges == asked"]  # -7 > 2 * 3.
    assert failed(_summary(), _check_config(faults=20)) == ["faults injected"]
    assert failed(None) == ["job finished"]
    assert failed(_summary(), exit_codes=dict(codes, **{"worker 1": -9})) == ["every task exited 0"]
    stuck = [({"fault": {"index": 0}}, {"problems": ["stuck: ..."]}), *assessed[1:]]
    assert failed(_summary(), faults=stuck) == ["every fault within its bound"]


def test_the_report_has_a_row_per_fault_and_the_verdict():
    injection = _injection(KILL_WORKER, "worker 1", 100.0, 100.2, at_secs=40.0)
    result = measure.assess(KILLED, injection, 2, measure.Bounds(), 304)
    record = {
        "settings": {
            "seed": 0,
            "workers": 2,
            "steps": 8000,
            "communication_period": 10,
            "save_checkpoint_steps": 1000,
        },
        "faults": [dict(injection, **result)],
        "summary": None,
        "startup_secs": [7.0, 9.0],
        "checks": [{"name": "faults injected", "ok": False, "detail": "1 of 3"}],
        "passed": False,
        "secs": 75.0,
    }
    [row] = report.fault_rows(record)
    assert row == (
        "0",
        KILL_WORKER,
        "40",
        "worker 1",
        "0.2",
        "21.0",
        "40",
        "",
        "w1 resumed at step 1350 (reported 1300)",
    )
    text = report.text(record)
    assert "| 0 | kill_restart_worker | 40 | worker 1 | 0.2 | 21.0 | 40 |  |" in text
    assert "| kill_restart_worker | 1 | 21.0 | 21.0 |" in text
    assert "FAIL faults injected: 1 of 3" in text
    assert text.endswith("verdict: FAILED")


@pytest.mark.subprocess
def test_help_answers_without_tensorflow():
    code = (
        "import runpy, sys\n"
        "sys.argv = ['soak', '--help']\n"
        "try:\n"
        "    runpy.run_module('soak', run_name='__main__')\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "assert 'tensorflow' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "--faults" in result.stdout and "--minutes" in result.stdout
