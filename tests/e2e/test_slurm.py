"""easgd-train on a real Slurm: the sbatch script of docs/SLURM.md trains 1 ps + 2 workers.

The fixture starts a single-node Slurm cluster in the test's temporary directory: `munged`
with a key of its own, `slurmctld` and `slurmd` (Debian's slurm-wlm 22.05, `.ci/run`
installs it) on free ports, this host as the node, no accounting. It needs root, and skips
saying why when it is not, when a program is missing, or when the daemons do not come up
within `START_SECS`. It stops them at the end and checks that no process is left.
"""

import contextlib
import fcntl
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import portpicker
import psutil
import pytest
from processes import child_env, process_alive, wait_for_exit

from tf_contrib_easgd.cluster import slurm

# Every test runs on the single-node Slurm of the `slurm_cluster` fixture: under
# pytest-xdist (`make test`) they share a worker, and so one Slurm.
pytestmark = [pytest.mark.root, pytest.mark.slurm, pytest.mark.xdist_group("slurm")]

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol", "scancel", "srun")
#: Deadlines: the daemons to report the node idle; a Slurm command; the whole training job
#: (three TensorFlow imports at once, ~30 s on 2 cores, and 200 steps: ~35 s measured).
START_SECS = 30.0
COMMAND_SECS = 20.0
JOB_SECS = 180.0
STOP_SECS = 15.0
#: This machine's lock of test Slurms, and how long to wait for another run's to end (its
#: module: the daemons, the job, the stop: ~60 s quiet, 2-3 min beside another test run).
LOCK_PATH = pathlib.Path(tempfile.gettempdir()) / "tf_contrib_easgd-test-slurm.lock"
LOCK_SECS = 420.0
SLURM_DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "SLURM.md"


class SingleNodeSlurm:
    """munged, slurmctld and slurmd of a one-node cluster, all files in `directory`."""

    def __init__(self, directory):
        self.directory = directory
        self.node = _node_name()
        self.conf = directory / "slurm.conf"
        self.socket = directory / "munge.socket"
        self.env = dict(
            child_env(),
            SLURM_CONF=str(self.conf),
            PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]),
        )
        self.daemons = []  # (name, Popen), in start order.
        self._stepds_before = set(_pids_named("slurmstepd"))

    def start(self):
        """Starts the daemons; skips the test when they do not make the node idle in time."""
        for name in ("state", "spool", "logs"):
            (self.directory / name).mkdir()
        key = self.directory / "munge.key"
        with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as file:
            file.write(os.urandom(128))
        self.conf.write_text(self._slurm_conf())
        munge = [
            "munged", "--foreground", "--force", f"--key-file={key}", f"--socket={self.socket}",
            f"--pid-file={self.directory}/munged.pid", f"--seed-file={self.directory}/munge.seed",
            f"--log-file={self.directory}/logs/munged.log",
        ]  # fmt: skip
        self._start("munged", munge)
        self._wait(self.socket.exists, "munged to make its socket")
        self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._start("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
        self._wait(lambda: self._node_state() == "idle", f"node {self.node} to be idle")

    def _slurm_conf(self):
        """A minimal slurm.conf: one node, this host; no accounting; no cgroups."""
        ctld_port, slurmd_port = portpicker.pick_unused_port(), portpicker.pick_unused_port()
        d = self.directory
        # Declared with 4 CPUs or more (config_overrides: trusted as written) so that 3 tasks
        # of one CPU each fit on a 2-core machine.
        return f"""\
ClusterName=easgdtest
SlurmctldHost={self.node}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/logs/slurmctld.log
SlurmdLogFile={d}/logs/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={self.node} CPUs={max(4, os.cpu_count() or 1)} State=UNKNOWN
PartitionName=test Nodes={self.node} Default=YES MaxTime=60 State=UP
"""

    def _start(self, name, command):
        with open(self.directory / "logs" / f"{name}.out", "wb") as log:  # The child's copy.
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        self.daemons.append((name, process))

    def _wait(self, ready, what):
        deadline = time.monotonic() + START_SECS
        while not ready():
            dead = [name for name, process in self.daemons if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"{dead} exited" if dead else f"no {what} within {START_SECS:.0f} s"
                pytest.skip(f"the single-node Slurm did not come up: {why}.\n{self.logs()}")
            time.sleep(0.2)

    def _node_state(self):
        try:
            return self.run(["sinfo", "-h", "-N", "-o", "%T", "-n", self.node]).stdout.strip()
        except subprocess.TimeoutExpired:
            return None

    def run(self, command, timeout=COMMAND_SECS, **kwargs):
        """Runs a Slurm command in this cluster's environment; returns the CompletedProcess."""
        return subprocess.run(
            command, capture_output=True, text=True, env=self.env, timeout=timeout, check=False,
            **kwargs,
        )  # fmt: skip

    def logs(self, lines=15):
        """The last lines of every daemon's log, for messages."""
        parts = []
        for path in sorted((self.directory / "logs").glob("*")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self):
        """Stops the daemons, the last started first; SIGKILL after `STOP_SECS`."""
        for _, process in reversed(self.daemons):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_SECS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_SECS)

    def stray_processes(self):
        """Processes left: any whose command line names this directory, any new slurmstepd."""
        mine = _pids_with(lambda command_line: str(self.directory) in command_line)
        stepds = set(_pids_named("slurmstepd")) - self._stepds_before
        return [pid for pid in [*mine, *stepds] if process_alive(pid)]


def _node_name():
    """This host's name as `hostname -s` prints it: slurmd's default node name."""
    return socket.gethostname().split(".")[0]


def _pids_with(test):
    """The pids of the processes whose command line (joined by spaces) passes `test`."""
    return [
        process.pid
        for process in psutil.process_iter(["cmdline"])
        if test(" ".join(process.info["cmdline"] or ()))
    ]


def _pids_named(name):
    return _pids_with(lambda command_line: command_line.startswith(name))


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A running single-node Slurm; stopped after the module's tests, and nothing left."""
    if os.geteuid() != 0:
        pytest.skip("a test Slurm needs root: slurmd runs job steps as their users.")
    missing = [program for program in PROGRAMS if shutil.which(program) is None]
    if missing:
        pytest.skip(f"Slurm is not installed (no {missing}): apt-get install slurm-wlm munge.")
    node = _node_name()
    try:
        socket.gethostbyname(node)
    except OSError as error:
        pytest.skip(f"this host's name {node!r} does not resolve ({error}).")
    with _one_slurm_at_a_time():
        cluster = SingleNodeSlurm(tmp_path_factory.mktemp("slurm"))
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
            left = cluster.stray_processes()
            for pid in left:  # Ours (their command lines name our directory): end them.
                os.kill(pid, signal.SIGKILL)
            assert wait_for_exit(left) == []
            assert not left, f"processes left after the daemons stopped: {left}"


@contextlib.contextmanager
def _one_slurm_at_a_time():
    """Holds this machine's lock of test Slurms while one runs.

    Two test runs at once (a developer's beside CI's, say) would each start a Slurm whose
    first job's tasks take the same ports (the port base follows the job id), and each
    would count the other's `slurmstepd` as a stray of its own.
    """
    with open(LOCK_PATH, "a") as lock:
        deadline = time.monotonic() + LOCK_SECS
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test Slurm held {LOCK_PATH} for {LOCK_SECS:.0f} s")
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _documented_sbatch_script():
    """The sbatch script of docs/SLURM.md: its one code block that starts with `#!`."""
    blocks = re.findall(r"^```bash\n(#!.*?)^```$", SLURM_DOC.read_text(), re.M | re.S)
    assert len(blocks) == 1, "docs/SLURM.md should have one sbatch script"
    return blocks[0]


def test_the_documented_sbatch_script_trains_a_job(slurm_cluster):
    # In the cluster's directory: the job's processes name it, so none can be left unseen.
    directory = slurm_cluster.directory / "job"
    directory.mkdir()
    script = directory / "easgd.sbatch"
    script.write_text(_documented_sbatch_script())
    model_dir, output = directory / "model", directory / "job.out"
    name = f"easgd-test-{uuid.uuid4().hex[:8]}"
    # The script's 3 nodes on this one node; 200 local steps per worker.
    command = [
        "sbatch", "--wait", f"--job-name={name}", "--nodes=1", "--cpus-per-task=1",
        f"--output={output}", f"--export=ALL,MODEL_DIR={model_dir},STEPS=200", str(script),
    ]  # fmt: skip
    started = time.monotonic()
    try:
        result = slurm_cluster.run(command, timeout=JOB_SECS, cwd=directory)
    except subprocess.TimeoutExpired:
        slurm_cluster.run(["scancel", f"--name={name}"])
        pytest.fail(f"the job did not end within {JOB_SECS:.0f} s:\n{_text(output)}")
    job_secs = time.monotonic() - started
    assert result.returncode == 0, f"{result.stderr}\n{_text(output)}\n{slurm_cluster.logs()}"
    job_id = int(re.search(r"Submitted batch job (\d+)", result.stdout).group(1))
    out = _text(output)
    # Task 0, the ps, is local task 0 of the node: on the job's port base, 20000 + 10 * (id
    # % 1000); tasks 1 and 2, the workers, on the next two ports.
    base = 20000 + 10 * (job_id % 1000)
    assert f"0: ps 0: serving at {slurm_cluster.node}:{base}\n" in out, out
    summary = json.loads((model_dir / "summary.json").read_text())
    assert (summary["num_ps"], summary["num_workers"]) == (1, 2)
    # 200 local steps each, an exchange every 10: 20 per worker, 40 in all.
    assert summary["local_steps"] == {"0": 200, "1": 200} and summary["exchanges"] == 40
    # ~4.4 epochs of each worker's half of the digits: 0.96 measured (chance: 0.1).
    assert summary["test_accuracy"] > 0.85
    assert "1: easgd-train: centre test accuracy" in out  # The chief's summary line.
    print(f"sbatch job {job_id}: {job_secs:.1f} s, accuracy {summary['test_accuracy']:.4f}")


@pytest.mark.parametrize(
    "hostlist", ["vm", "n[9-10]", "n[01-03,7],gpu1", "n[099-101]", "rack1-n[1-2],login", "x[1-010]"]
)
def test_node_lists_expand_as_scontrol_expands_them(slurm_cluster, hostlist):
    shown = slurm_cluster.run(["scontrol", "show", "hostnames", hostlist])
    assert shown.returncode == 0, shown.stderr
    assert slurm.expand_hostlist(hostlist) == shown.stdout.split()


def _text(path):
    return path.read_text(errors="replace") if path.exists() else f"({path} was not written)"
