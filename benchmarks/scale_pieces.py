"""What a 64-worker job needs besides exchanges: start-up, its end, the ledger, checkpoints.

Measured on the scale harness's cluster (`scale_cluster.py`) with the library's and
easgd-train's own objects, run by the hosts (`scale_task.Host.job`, `ledger_load`,
`checkpoint`):

- `job`: every worker opens its session as easgd-train does, the chief `CHIEF_DELAY_SECS`
  late (the others wait for the centre with `CentreWaitingSessionCreator`), exchanges,
  writes its count into the work ledger, and ends with easgd-train's `finish.py`; the
  parameter servers' CPU is read while the others wait for the chief (their readiness
  polls) and while the chief ends the job (their ledger polls).
- `ledger`: the work ledger on ps 0 with every worker writing its count back to back, and
  with every worker reading it as a finished worker waits for the end.
- `checkpoint`: easgd-train's sharded checkpoint of the centre on 1, 2 and 4 ps tasks.
"""

import os
import tempfile
import time

from benchmarks.cluster import wall_time_in
from benchmarks.scale_costs import ms, percentiles

CALL_TIMEOUT_SECS = 600.0
#: How late the chief starts after the others (its process slower to start, say).
CHIEF_DELAY_SECS = 3.0
#: Exchanges each worker takes in `job` before it finishes.
JOB_EXCHANGES = 3
#: The ledger's windows: several of the longest poll interval (1.28 s at 64 workers).
LEDGER_SECS = 6.0
CHECKPOINT_REPEATS = 3


def _ps_cpu(cluster, ps_tasks):
    return sum(cluster.counters()["ps_cpu"][:ps_tasks])


def job(cluster, model, workers, ps_tasks, log):
    """Start-up and end of a `workers`-worker job (see the module docstring)."""
    container = f"j{os.getpid()}w{workers}"
    model_dir = tempfile.mkdtemp(prefix="easgd-scale-job-")
    common = {"model": model, "ps_tasks": ps_tasks, "num_workers": workers,
              "container": container}  # fmt: skip
    hosts = [h for h in range(cluster.num_hosts) if cluster.host_workers(h, workers)]
    cluster.call_hosts(
        {h: ("job", {"workers": cluster.host_workers(h, workers), **common}) for h in hosts},
        CALL_TIMEOUT_SECS,
    )
    start_at = wall_time_in(2.0)
    arguments = {"start_at": start_at, "chief_delay": CHIEF_DELAY_SECS, "model_dir": model_dir,
                 "exchanges": JOB_EXCHANGES}  # fmt: skip

    def waiting_cpu():  # The ps tasks' CPU while the others wait for the chief to start.
        time.sleep(max(0.0, start_at + 0.5 - time.time()))
        before = _ps_cpu(cluster, ps_tasks)
        time.sleep(max(0.0, start_at + CHIEF_DELAY_SECS - time.time()))
        return (_ps_cpu(cluster, ps_tasks) - before) / (CHIEF_DELAY_SECS - 0.5)

    answers, waiting = cluster.call_hosts(
        {h: ("job", {"workers": cluster.host_workers(h, workers), **common, **arguments})
         for h in hosts},
        CALL_TIMEOUT_SECS,
        waiting_cpu,
    )  # fmt: skip
    cluster.call(0, "release", CALL_TIMEOUT_SECS, container=container)
    times = [t for answer in answers.values() for t in answer["workers"]]
    chief = next(t for t in times if t["index"] == 0)
    others = [t for t in times if t["index"] != 0]
    last_finished = max(t["finished"] for t in times)
    measured = {
        "workers": workers,
        "ps": ps_tasks,
        "chief": chief,
        # Seconds from the chief's start: its session (the centre set up), the others'.
        "chief_ready": chief["ready"] - CHIEF_DELAY_SECS,
        "others_ready": percentiles([t["ready"] - CHIEF_DELAY_SECS for t in others]),
        "last_ready": max(t["ready"] for t in times) - CHIEF_DELAY_SECS,
        "waiting_ps_cores": waiting,
        "wait_for_counts": chief["saved_from"] - last_finished,
        "checkpoint": chief["saved"] - chief["saved_from"],
        "export": chief["exported"] - chief["exported_from"],
        "acknowledged": chief["done"] - chief["ended"],
        "end_of_job": chief["done"] - last_finished,
        "others_done_after_end": percentiles([t["done"] - chief["ended"] for t in others]),
    }
    log(
        f"  job of {workers} workers, {ps_tasks} ps: after the chief's start, its session "
        f"{measured['chief_ready']:.2f} s, the others' {measured['others_ready']['median']:.2f} s"
        f" (median), the last {measured['last_ready']:.2f} s; "
        f"ps CPU while they waited {waiting:.2f} cores; end of job {measured['end_of_job']:.2f}"
        f" s (counts {measured['wait_for_counts']:.2f}, checkpoint {measured['checkpoint']:.2f},"
        f" export {measured['export']:.2f}, acknowledgements {measured['acknowledged']:.2f} s)"
    )
    return measured


def ledger(cluster, workers, poll, log):
    """The work ledger on ps 0 with `workers` writing it back to back (`poll` None) or
    polling it (`scale_task.Host.ledger_load`)."""
    container = f"l{os.getpid()}w{workers}{poll or 'write'}"
    common = {"num_workers": workers, "container": container}
    cluster.call(0, "ledger_load", CALL_TIMEOUT_SECS, workers=[0], **common)
    start_at = wall_time_in(5.0)  # After every session and its first poll.

    def cpu():
        time.sleep(max(0.0, start_at - time.time()))
        before = _ps_cpu(cluster, 1)
        time.sleep(max(0.0, start_at + LEDGER_SECS - time.time()))
        return _ps_cpu(cluster, 1) - before

    answers, ps_cpu = cluster.call_hosts(
        {
            h: ("ledger_load", {"workers": cluster.host_workers(h, workers), "start_at": start_at,
                                "seconds": LEDGER_SECS, "poll": poll, **common})
            for h in range(cluster.num_hosts)
            if cluster.host_workers(h, workers)
        },
        CALL_TIMEOUT_SECS,
        cpu,
    )  # fmt: skip
    cluster.call(0, "release", CALL_TIMEOUT_SECS, container=container)
    latencies = sorted(t for answer in answers.values() for t in answer["latencies"])
    poll_secs = next(iter(answers.values()))["poll_secs"]
    measured = {
        "workers": workers,
        "poll": poll,
        "poll_secs": poll_secs,
        "calls_per_sec": len(latencies) / LEDGER_SECS,
        "latency": percentiles(latencies),
        "ps0_cpu_per_call": ps_cpu / max(len(latencies), 1),
        "ps0_cores": ps_cpu / LEDGER_SECS,
    }
    what = f"polled ({poll}) every {poll_secs:g} s" if poll else "written back to back"
    log(
        f"  ledger on ps 0, {workers} workers, {what}: {measured['calls_per_sec']:.0f} calls/s, "
        f"latency {measured['latency']['median'] * 1e3:.1f}/{measured['latency']['p99'] * 1e3:.1f}"
        f" ms, ps 0 {measured['ps0_cpu_per_call'] * 1e3:.2f} ms/call ({measured['ps0_cores']:.2f}"
        " cores)"
    )
    return measured


def checkpoint(cluster, model, ps_tasks, log):
    """easgd-train's sharded checkpoint of the centre on `ps_tasks` ps tasks."""
    container = f"c{os.getpid()}p{ps_tasks}"
    answer = cluster.call(
        0, "checkpoint", CALL_TIMEOUT_SECS, model=model, ps_tasks=ps_tasks,
        container=container, model_dir=tempfile.mkdtemp(prefix="easgd-scale-ckpt-"),
        repeats=CHECKPOINT_REPEATS,
    )  # fmt: skip
    cluster.call(0, "release", CALL_TIMEOUT_SECS, container=container)
    measured = {
        "ps": ps_tasks,
        "save": percentiles(answer["save_secs"]),
        "restore": percentiles(answer["restore_secs"]),
    }
    log(
        f"  checkpoint on {ps_tasks} ps: save {measured['save']['median']:.3f} s, restore "
        f"{measured['restore']['median']:.3f} s (medians of {CHECKPOINT_REPEATS})"
    )
    return measured


def measure(cluster, model, plan, log):
    """Every piece, on fresh parameter servers; returns their results."""
    cluster.start_ps()
    most, ps_tasks = max(plan["workers"]), max(plan["ps"])
    results = {
        "checkpoint": [checkpoint(cluster, model, p, log) for p in plan["ps"]],
        "ledger": [ledger(cluster, most, poll, log) for poll in (None, "read", "end")],
        "job": [job(cluster, model, w, ps_tasks, log) for w in sorted({2, most})],
        "chief_delay_secs": CHIEF_DELAY_SECS,
    }
    cluster.stop_ps()
    return results


def lines(results):
    """The measured lines of what a job of the most workers needs besides exchanges."""
    pieces = results.get("pieces")
    if not pieces:
        return []
    lines = []
    for job in pieces["job"]:
        others = job["others_ready"]
        lines.append(
            f"- **Start-up, {job['workers']} workers on {job['ps']} ps tasks** (the chief "
            f"{pieces['chief_delay_secs']:g} s late): the chief's session (the centre set up) "
            f"{job['chief_ready']:.2f} s after its start, the others' a median "
            f"{others['median']:.2f} s and at most {job['last_ready']:.2f} s after it "
            f"(every session made on this machine's two cores); while "
            f"{job['workers'] - 1} waited for the chief, their readiness polls took "
            f"{job['waiting_ps_cores']:.2f} cores of the ps tasks."
        )
        lines.append(
            f"- **End of the job, {job['workers']} workers:** from the last worker's last "
            f"count to the chief's end {job['end_of_job']:.2f} s: seeing every count "
            f"{job['wait_for_counts']:.2f} s, the sharded checkpoint {job['checkpoint']:.2f} s, "
            f"the export {job['export']:.2f} s, every finished worker's acknowledgement "
            f"{job['acknowledged']:.2f} s."
        )
    for ledger in pieces["ledger"]:
        poll = ledger.get("poll", "read" if ledger["poll_secs"] else None)
        what = "each writing its count back to back"
        if poll == "read":
            what = (
                f"each reading the whole ledger every {ledger['poll_secs']:g} s (finished "
                "workers' polls before `WorkLedger.end_state`)"
            )
        elif poll == "end":
            what = (
                f"each polling the end of the job every {ledger['poll_secs']:g} s (a "
                "finished worker's poll now)"
            )
        latency = ledger["latency"]
        lines.append(
            f"- **The work ledger on ps 0, {ledger['workers']} workers {what}:** "
            f"{ledger['calls_per_sec']:.0f} calls/s, latency {ms(latency['median'])} ms "
            f"(median), {ms(latency['p99'])} ms (p99); {ledger['ps0_cpu_per_call'] * 1e3:.2f} "
            f"ms of ps 0's CPU a call, {ledger['ps0_cores']:.2f} of its cores."
        )
    saves = ", ".join(
        f"{c['ps']} ps: {ms(c['save']['median'])} ms (restore {ms(c['restore']['median'])})"
        for c in pieces["checkpoint"]
    )
    lines.append(f"- **Checkpoint of the centre** (easgd-train's sharded saver), {saves}.")
    top = [pc for pc in results["ps_counts"] if pc["round"] == 0]
    fds = ", ".join(
        f"{pc['ps']} ps {pc['wire'] or 'float32'}: a ps {pc['fds']['ps'][0]['all']} "
        f"({pc['fds']['ps'][0]['sockets']} sockets), a host of "
        f"{len(range(0, max(results['plan']['workers']), results['plan']['hosts']))} workers "
        f"{pc['fds']['hosts'][0]['all']} ({pc['fds']['hosts'][0]['sockets']})"
        for pc in top
    )
    lines.append(f"- **File descriptors** with {max(results['plan']['workers'])} workers: {fds}.")
    return lines
