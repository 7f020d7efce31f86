"""End-to-end tests (ps and worker OS processes): the chaos soak (soak/).

The tests of its other tiers are in tests/tools/test_soak.py.
"""

import time

import psutil
import pytest
from processes import process_alive

from benchmarks.common import network
from soak import report, runner
from soak.schedule import CUT, FREEZE, KILL_WORKER, Fault

E2E_STEPS = 8000  # ~20-40 s of training for each of 2 workers on 2 cores; the faults' costs.


E2E_DEADLINE_SECS = 200  # The whole soak, start-up (4 TensorFlow imports) to the last exit.


def _processes_mentioning(text):
    """The pids of processes whose command line contains `text`."""
    return [
        process.pid
        for process in psutil.process_iter(["cmdline"])
        if text in " ".join(process.info["cmdline"] or ()) and process_alive(process.pid)
    ]


@pytest.mark.root
@pytest.mark.netns
def test_a_three_fault_soak_passes_and_leaves_nothing_behind(tmp_path):
    reason = network.unavailable_reason()
    if reason:
        pytest.skip(f"the soak needs network namespaces: {reason}")
    schedule = (
        Fault(0, KILL_WORKER, "worker 1", 0.0, at_fraction=0.1, settle_secs=1.0),
        Fault(1, FREEZE, "ps 0", 4.0, at_fraction=0.3, settle_secs=1.0),
        Fault(2, CUT, "worker 1", 6.0, at_fraction=0.5, settle_secs=1.0),
    )
    config = runner.SoakConfig(
        schedule=schedule,
        work_dir=str(tmp_path),
        workers=2,
        steps=E2E_STEPS,
        save_checkpoint_steps=1000,
        stall_report_secs=2.0,
        deadline_secs=E2E_DEADLINE_SECS,
    )
    started = time.monotonic()
    record = runner.run(config)
    secs = time.monotonic() - started
    print(f"\n{report.text(record)}\nsoak: {secs:.0f} s")
    assert record["passed"], report.text(record)
    assert [fault["fault"]["kind"] for fault in record["faults"]] == [KILL_WORKER, FREEZE, CUT]
    assert all(fault["cost_secs"] <= fault["bound_secs"] + 60 for fault in record["faults"])
    assert record["summary"]["local_steps"] == {"0": E2E_STEPS, "1": E2E_STEPS}
    # Nothing left: no task, no namespace.
    assert _processes_mentioning(str(tmp_path)) == []
    assert record["namespaces"].startswith("easgd-soak-")
    assert record["namespaces"] not in network.run_ip("netns", "list", check=False).stdout
