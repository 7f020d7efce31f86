"""Multi-host fault: ps and two workers on three network hosts; one worker's link is cut.

Each task of easgd-train runs in a Linux network namespace of its own, a "host" with one
interface (`eth0`, one end of a veth pair) and a private 10.x address. The other ends of
the three veth pairs are ports of a bridge in a fourth namespace, the "switch", so all the
traffic of the job crosses real interfaces and the test never touches the network of the
machine: deleting the namespaces deletes everything made here.

Once both workers train, the test takes worker 1's switch port down, as if its cable
were pulled. The chief (worker 0) does not need worker 1: it finishes its steps, waits at
most `--timeout_secs` for worker 1's "done" token, warns that worker 1 did not finish,
exports the centre and writes `summary.json`; then the parameter server, told by the
chief, exits by itself. Worker 1 is left hanging in gRPC (or has failed by then) and is
stopped by the test.
"""

import json
import sys
import time

import pytest
import tensorflow as tf
from processes import child_env

from benchmarks.common import network as network_module
from tf_contrib_easgd.runner import launcher
from tf_contrib_easgd.runner.display import parse_event
from tf_contrib_easgd.trainer import stall

STEPS = 1500
PERIOD = 10
LOG_EVERY_STEPS = 50
# The chief waits this long for worker 1's "done" token, and worker 1 waits this long for
# the chief to initialise the centre: the three processes start together, so that wait
# is only the difference of their start-up times (a few seconds), not a TF import.
TIMEOUT_SECS = 30
STARTUP_DEADLINE_SECS = 100  # Three TF imports at once on 2 busy cores: ~15-40 s.
PORT = 2222
HOSTS = {"ps0": 1, "w0": 2, "w1": 3}  # Host name -> last byte of its address.


@pytest.fixture
def network():
    """A switch and the hosts `HOSTS`; skips where namespaces cannot be made."""
    reason = network_module.unavailable_reason()
    if reason:
        pytest.skip(f"multi-host test needs network namespaces: {reason}")
    try:
        net = network_module.HostNetwork(HOSTS, name="easgd-mh")
    except RuntimeError as error:  # E.g. no veth or bridge support in this kernel.
        pytest.skip(f"multi-host test cannot wire its hosts: {error}")
    try:
        yield net
    finally:
        left = net.delete()
        listed = network_module.run_ip("netns", "list", check=False).stdout
        assert not left and net.prefix not in listed, f"namespaces left behind: {listed}"


def _task(network, tmp_path, job, index, host, timeout_secs=TIMEOUT_SECS, *flags):
    """The `TaskSpec` of one task, run in the namespace of `host`, with `flags` added."""
    argv = (
        "ip", "netns", "exec", network.namespace(host),
        sys.executable, "-m", "tf_contrib_easgd.trainer", "--cluster=task",
        f"--job_name={job}", f"--task_index={index}",
        f"--ps_hosts={network.address('ps0')}:{PORT}",
        f"--worker_hosts={network.address('w0')}:{PORT},{network.address('w1')}:{PORT}",
        f"--steps={STEPS}", f"--communication_period={PERIOD}",
        f"--log_every_steps={LOG_EVERY_STEPS}", f"--model_dir={tmp_path / 'model'}",
        "--progress_format=json", f"--timeout_secs={timeout_secs}", *flags,
    )  # fmt: skip
    return launcher.TaskSpec(job, index, argv, finishes=job == "worker")


def _pump(clusters, timeout_secs):
    """Streams the clusters' output to their `on_line` for about `timeout_secs`.

    Returns:
        `{task name: TaskFailedError}` of the clusters whose child exited non-zero.
    """
    failed = {}
    for job in clusters:
        try:
            job.wait_for_line(lambda task, line: False, timeout_secs / len(clusters))
        except launcher.TaskFailedError as error:
            failed[error.task.name] = error
    return failed


def _wait_for(condition, clusters, events, timeout_secs, what):
    """Streams output until `condition()` holds; fails the test at the deadline.

    Args:
        condition: called without arguments; true once the wait is over.
        clusters: the `LocalCluster`s whose output to stream.
        events: the events seen so far (for the message of a failure).
        timeout_secs: the deadline.
        what: what is awaited, for the message of a failure.
    """
    deadline = time.monotonic() + timeout_secs
    while not condition():
        failed = _pump(clusters, 0.2)
        if failed:
            name, error = next(iter(failed.items()))
            pytest.fail(f"{name} {error} while waiting for {what}:\n" + "\n".join(error.tail))
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout_secs} s; events: {events[-10:]}")


class _Events:
    """The progress events of the job's tasks, in the order their lines were read."""

    def __init__(self):
        self.seen = []

    def on_line(self, task, line):
        """The clusters' `on_line`: keeps the line's event, if it is one."""
        del task  # Each event names its task.
        event = parse_event(line)
        if event:
            self.seen.append(event)

    def of(self, kind, task):
        """The events of `kind` of `task` ("worker 0", ...) so far."""
        return [e for e in self.seen if e["event"] == kind and e["task"] == task]


def _run_and_cut_off_worker_1(network, tmp_path, events):
    """Starts the job, cuts worker 1's link once both workers train, and ends the job.

    Returns:
        A dict: "started", "trained" and "summarised" (`time.monotonic()` at the start, at
        the cut and at the chief's summary), "cut" (`time.time()` of the cut),
        "chief_step_at_cut", "rx_bytes" (received by the ps host) and "lost_code" (worker
        1's exit code before the test stopped it; None if it still ran).
    """
    options = {"env": child_env(), "log_dir": str(tmp_path / "logs"), "on_line": events.on_line}
    ps_and_chief = [
        _task(network, tmp_path, "ps", 0, "ps0"),
        _task(network, tmp_path, "worker", 0, "w0"),
    ]
    # Worker 1 is supervised apart: its failure after the cut is expected, and must not
    # stop the streaming of the others' output.
    with (
        launcher.LocalCluster(ps_and_chief, **options) as job,
        launcher.LocalCluster([_task(network, tmp_path, "worker", 1, "w1")], **options) as lost,
    ):
        run = {"started": time.monotonic()}
        job.start(only=["ps 0"])
        lost.start()
        job.start()
        _wait_for(
            lambda: events.of("progress", "worker 0") and events.of("progress", "worker 1"),
            (job, lost), events.seen, STARTUP_DEADLINE_SECS, "progress of both workers",
        )  # fmt: skip
        run["trained"] = time.monotonic()
        network.unplug("w1")
        run["cut"] = time.time()
        run["chief_step_at_cut"] = events.of("progress", "worker 0")[-1]["step"]
        # The chief must have most of its training ahead, or the cut would show little.
        assert run["chief_step_at_cut"] <= STEPS // 2

        # Training (~5 s), the wait for worker 1 (TIMEOUT_SECS), export and evaluation.
        _wait_for(
            lambda: events.of("summary", "worker 0"),
            (job,),
            events.seen,
            TIMEOUT_SECS + 45,
            "summary",
        )
        run["summarised"] = time.monotonic()
        _check_the_chief_and_ps_exited(job)
        run["rx_bytes"] = network.link_bytes("ps0")[1]
        run["lost_code"] = _stop_worker_1(lost)
    return run


def _check_the_chief_and_ps_exited(job):
    """Checks that the chief exits with 0 after its summary, and then the ps."""
    ps, chief = job.children
    assert chief.wait(20) == 0, "the chief did not exit with code 0 after its summary"
    # The chief's token stops the parameter server.
    assert job.wait_for_servers(20), "the parameter server did not exit after the chief"
    assert ps.poll() == 0


def _stop_worker_1(lost):
    """Checks that worker 1 has not exited with 0, stops it; returns its exit code before."""
    # Worker 1 never finished. Cut off without the connection being closed, it waits
    # in gRPC: neither the session's operation timeout nor a step deadline ends that
    # wait (seen here 60 s after the cut with --timeout_secs=30). It is stopped here.
    worker_1 = lost.children[0]
    _pump((lost,), 0.1)
    lost_code = worker_1.poll()
    assert lost_code != 0
    lost.stop()
    assert worker_1.poll() is not None
    return lost_code


@pytest.mark.root
@pytest.mark.netns
def test_the_chief_finishes_when_a_worker_host_is_cut_off(network, tmp_path):
    events = _Events()
    of = events.of
    run = _run_and_cut_off_worker_1(network, tmp_path, events)
    lost_code = run["lost_code"]
    print(
        f"start-up {run['trained'] - run['started']:.1f} s; cut at chief step "
        f"{run['chief_step_at_cut']}; summary {run['summarised'] - run['trained']:.1f} s "
        f"later; worker 1 "
        f"{'still ran' if lost_code is None else launcher.describe_exit(lost_code)}"
    )

    assert not of("done", "worker 1")
    # Cut off, worker 1 could not read global_step for a report any more.
    assert all(e["time"] < run["cut"] + 0.5 for e in of("progress", "worker 1"))

    summary = of("summary", "worker 0")[0]
    written = json.loads((tmp_path / "model" / "summary.json").read_text())
    assert {key: summary[key] for key in written} == written
    _check_the_chief_finished_alone(events, summary)
    _check_global_step_after_the_cut(events, summary, run["cut"])
    _check_traffic_and_accuracy(summary, run["rx_bytes"])


def _check_the_chief_finished_alone(events, summary):
    """The chief took all its steps and waited the whole timeout for worker 1."""
    of = events.of
    # The chief took all its steps, and alone it reported them.
    chief_progress = of("progress", "worker 0")
    assert chief_progress[-1]["step"] == STEPS
    assert of("done", "worker 0")[0]["steps"] == STEPS
    # The ledger kept worker 1's count from before the cut: at least the steps it reported.
    reported = max(e["step"] for e in of("progress", "worker 1"))
    assert summary["local_steps"]["0"] == STEPS
    assert reported <= summary["local_steps"]["1"] < STEPS
    assert summary["unfinished_workers"] == [1]
    warnings = of("warning", "worker 0")
    assert len(warnings) == 1
    assert "workers [1] did not finish" in warnings[0]["message"]
    # It waited the whole timeout for worker 1's token, and no longer.
    waited = warnings[0]["time"] - of("done", "worker 0")[0]["time"]
    assert TIMEOUT_SECS <= waited < TIMEOUT_SECS + 10


def _check_global_step_after_the_cut(events, summary, cut):
    """global_step grew by worker 1's exchanges before the `cut` only."""
    # global_step counts exchanges: the chief's STEPS / PERIOD and worker 1's before the
    # cut, at least the LOG_EVERY_STEPS / PERIOD of the steps it reported (7 here): far
    # fewer than its share.
    chief_exchanges = STEPS // PERIOD
    lost_exchanges = summary["exchanges"] - chief_exchanges
    assert summary["exchanges"] >= chief_exchanges
    assert LOG_EVERY_STEPS // PERIOD <= lost_exchanges < chief_exchanges // 2
    # Nothing of worker 1 reached the ps after the cut: from the chief's first report
    # after it (the chief then had >= 750 steps, >= 1.3 s, to go), global_step grew by
    # the chief's exchanges exactly.
    first = next(e for e in events.of("progress", "worker 0") if e["time"] > cut + 0.5)
    assert summary["exchanges"] - first["exchanges"] == (STEPS - first["step"]) // PERIOD


def _check_traffic_and_accuracy(summary, rx_bytes):
    """The exchanges' bytes reached the ps host's eth0; the exported centre learnt."""
    # The traffic went through the ps's eth0: each exchange sent it a value for every
    # parameter, 2 bytes each over task mode's default bfloat16 wire (4 at float32; the
    # export holds the centre and the scalar global_step).
    shapes = tf.train.load_checkpoint(summary["export"]).get_variable_to_shape_map()
    parameters = sum(tf.TensorShape(shape).num_elements() for shape in shapes.values())
    width = {"bfloat16": 2, "float16": 2, "float32": 4}[summary["wire_dtype"]]
    assert rx_bytes > summary["exchanges"] * parameters * width  # ~3 MB in bfloat16.

    # The chief alone took 1500 steps of batch 32, ~66 epochs of its 721-digit shard, and
    # after the cut the centre followed it alone (task mode's defaults: moving rate
    # 0.9 / 2 = 0.45 per exchange, overlapped, 145 exchanges). The exported centre scored
    # 0.980 on the 355 held-out digits in every run here with contrib's moving rate; 0.85
    # leaves room for a slower or more asynchronous run, far above chance (0.1) and the
    # untrained centre.
    assert summary["test_examples"] == 355
    assert summary["test_accuracy"] > 0.85


# The cut of the test below: long enough for any retry or keepalive of gRPC to give up
# (it waits; see docs/RELIABILITY.md, "Partitions"), short enough for the chief's wait.
CUT_SECS = 15
RESTORED_TIMEOUT_SECS = 60  # Of the tasks: the chief waits this long for worker 1.
STALL_REPORT_SECS = 5  # --stall_report_secs: a step waiting this long is reported.


@pytest.mark.root
@pytest.mark.netns
def test_a_worker_cut_off_for_a_while_says_so_and_goes_on_when_its_link_is_back(network, tmp_path):
    events = _Events()
    of = events.of
    options = {"env": child_env(), "log_dir": str(tmp_path / "logs"), "on_line": events.on_line}
    tasks = [
        _task(
            network,
            tmp_path,
            job,
            index,
            host,
            RESTORED_TIMEOUT_SECS,
            f"--stall_report_secs={STALL_REPORT_SECS}",
        )  # fmt: skip
        for job, index, host in (("ps", 0, "ps0"), ("worker", 0, "w0"), ("worker", 1, "w1"))
    ]
    with launcher.LocalCluster(tasks, **options) as job:
        job.start()
        _wait_for(
            lambda: of("progress", "worker 0") and of("progress", "worker 1"),
            (job,), events.seen, STARTUP_DEADLINE_SECS, "progress of both workers",
        )  # fmt: skip
        network.unplug("w1")
        cut = time.time()
        _wait_for(lambda: time.time() > cut + CUT_SECS, (job,), events.seen, 60, "the cut")
        restored = time.time()  # Before the link is back: the worker may go on at once.
        network.plug("w1")
        _wait_for(
            lambda: of("summary", "worker 0"),
            (job,), events.seen, RESTORED_TIMEOUT_SECS + 60, "summary",
        )  # fmt: skip
        # The chief exits after its summary, and its token stops the ps.
        assert [child.wait(30) for child in job.children[:2]] == [0, 0]
        lost_code = job.children[2].wait(10)  # Worker 1: 0 once done, None if still waiting.
    summary = of("summary", "worker 0")[0]
    # Cut off, worker 1 made no progress: each report reads global_step on the ps. (Its
    # last report before the cut may be written up to 0.5 s after it.)
    assert not [e for e in of("progress", "worker 1") if cut + 0.5 < e["time"] < restored]
    # It said so: STALL_REPORT_SECS into its step, a probe (<= 1 s) and a poll (0.5 s)
    # later, naming the ps as unreachable. (A later step may stall too, after the link is
    # back, while another connection's retransmission backs off: seen once, 11 s.)
    stalled = of("stalled", "worker 1")
    assert cut + STALL_REPORT_SECS - 0.5 < stalled[0]["time"] < cut + STALL_REPORT_SECS + 3
    assert stalled[0]["unreachable"] == [f"{network.address('ps0')}:{PORT}"]
    assert not of("stalled", "worker 0")  # The chief never needs worker 1.
    assert summary["test_accuracy"] > 0.85  # 0.96-0.98 in the runs here; chance is 0.1.
    # Each stalled step either went on by itself once the link was back (TCP retransmits
    # after a backoff, 11-12 s after this cut) or, still waiting REJOIN_AFTER_SECS after
    # the ps took connections again, was given up: the process restarted itself.
    went_on, rejoined = of("resumed", "worker 1"), of("rejoining", "worker 1")
    assert sorted(e["step"] for e in went_on + rejoined) == sorted(e["step"] for e in stalled)
    resumed = min(e["time"] for e in of("progress", "worker 1") if e["time"] >= restored)
    print(
        f"worker 1 cut off for {restored - cut:.1f} s; its next report {resumed - restored:.1f} "
        f"s after the link came back; rejoined: {len(rejoined)}; recoveries: "
        f"{len(of('recovering', 'worker 1'))}; summary: {summary['local_steps']}, "
        f"{summary['exchanges']} exchanges, accuracy {summary['test_accuracy']:.4f}"
    )
    if rejoined:
        [rejoining] = rejoined
        # The link was seen back within a poll and a probe (< 1.5 s) of the plug; the
        # restarted process started from its count in the ledger, a multiple of PERIOD
        # (counts are written at exchanges). The stalled step is named by the steps taken
        # before it, and what stalled may be its last call, the ledger's write: reached
        # the ps, its answer lost in the cut (seen in CI: stalled at 99, restarted at 100).
        # So at most the stalled step + 1.
        assert rejoining["time"] - restored >= stall.REJOIN_AFTER_SECS
        assert rejoining["time"] - restored < stall.REJOIN_AFTER_SECS + 5
        [restart] = [e for e in of("started", "worker 1") if e["time"] > rejoining["time"]][:1]
        assert restart["step"] <= rejoining["step"] + 1 and restart["step"] % PERIOD == 0
    else:
        # (A stalled step that reports progress, every LOG_EVERY_STEPS, prints that report
        # before its "resumed".)
        assert restored <= went_on[0]["time"] < restored + 60
    assert restored <= resumed < restored + 60
    # Either way it finished, same process, and the chief counted all its steps.
    assert lost_code == 0
    assert of("done", "worker 1")[-1]["steps"] == STEPS
    assert summary["local_steps"] == {"0": STEPS, "1": STEPS}
    assert not of("warning", "worker 0")
    # Both workers' exchanges, STEPS / PERIOD each (300). A recovery or a restart of worker
    # 1 may add one: the exchange in flight at the cut may have reached the ps before its
    # count did.
    slack = 1 + len(of("recovering", "worker 1")) + len(rejoined)
    assert abs(summary["exchanges"] - 2 * STEPS // PERIOD) <= slack
