"""Tests of the one place that reads a job's cluster: TF_CONFIG as the operator writes it, Slurm.

`tf_contrib_easgd.cluster.tf_config` and `tf_contrib_easgd.cluster.slurm` build a
`ClusterTask` from the environment; easgd-train (`trainer.config.plan_from_flags`) picks the
source. TF_CONFIG is
checked against the JSON that Kubernetes' training operator (kubeflow.org/v1 TFJob) writes,
and both readers against TensorFlow's own cluster resolvers where those apply. No servers:
tests/e2e/test_slurm.py runs a real Slurm.
"""

import json
import pathlib
import socket

import pytest
import tensorflow as tf
from absl.testing import flagsaver

from tf_contrib_easgd import ClusterConfigError, ClusterTask
from tf_contrib_easgd.cluster import slurm, tf_config
from tf_contrib_easgd.trainer import cli, preflight
from tf_contrib_easgd.trainer.config import UsageError, plan_from_flags

# --- TF_CONFIG as the training operator writes it ---------------------------------------------


def _operator_tf_config(replicas, task_type, index, job="easgd", namespace="default"):
    """The TF_CONFIG the training operator gives the pod `task_type`-`index` of TFJob `job`.

    As kubeflow/training-operator's genTFConfigJSONStr writes it: every replica type of
    the job (Evaluator included) in lower case, one `<job>-<type>-<i>.<namespace>.svc:2222`
    address per replica, the task's type in lower case, and `"environment": "cloud"`.
    """
    cluster = {
        kind.lower(): [f"{job}-{kind.lower()}-{i}.{namespace}.svc:2222" for i in range(count)]
        for kind, count in replicas.items()
    }
    config = {"cluster": cluster, "task": {"type": task_type, "index": index}}
    return json.dumps({**config, "environment": "cloud"})


JOB = {"Chief": 1, "Worker": 2, "PS": 1, "Evaluator": 1}
CHIEF = "easgd-chief-0.default.svc:2222"
WORKERS = ("easgd-worker-0.default.svc:2222", "easgd-worker-1.default.svc:2222")


@pytest.mark.parametrize(
    ("replicas", "task_type", "index", "job", "task_index"),
    [
        # Chief, then TF_CONFIG's worker i as worker i + 1: 3 EASGD workers.
        (JOB, "chief", 0, "worker", 0),
        (JOB, "worker", 0, "worker", 1),
        (JOB, "worker", 1, "worker", 2),
        (JOB, "ps", 0, "ps", 0),
        # The operator's older Master replica type is the chief, too.
        ({"Master": 1, "Worker": 2, "PS": 1}, "master", 0, "worker", 0),
        ({"Master": 1, "Worker": 2, "PS": 1}, "worker", 1, "worker", 2),
        # Workers only: worker i is worker i, worker 0 the chief.
        ({"Worker": 2, "PS": 2}, "worker", 0, "worker", 0),
        ({"Worker": 2, "PS": 2}, "ps", 1, "ps", 1),
    ],
)
def test_each_pod_of_a_tfjob_runs_its_task(replicas, task_type, index, job, task_index):
    task = tf_config.cluster_from_tf_config(_operator_tf_config(replicas, task_type, index))
    assert (task.job_name, task.task_index, task.source) == (job, task_index, "TF_CONFIG")
    trainers = [t for t in ("chief", "master", "worker") for _ in range(replicas.get(t.title(), 0))]
    assert task.num_workers == len(trainers) and task.num_ps == replicas["PS"]
    assert all("evaluator" not in host for host in task.worker_hosts + task.ps_hosts)
    assert task.origin == f"TF_CONFIG cluster.{task_type}[{index}]"


def test_an_empty_chief_list_is_no_chief():
    text = json.dumps(
        {"cluster": {"chief": [], "worker": list(WORKERS), "ps": ["p:1"]},
         "task": {"type": "worker", "index": 1}}
    )  # fmt: skip
    task = tf_config.cluster_from_tf_config(text)
    assert (task.task_index, task.address) == (1, WORKERS[1])


def test_the_chief_comes_first_among_the_workers():
    task = tf_config.cluster_from_tf_config(_operator_tf_config(JOB, "worker", 1))
    assert task.worker_hosts == (CHIEF, *WORKERS)
    assert task.address == WORKERS[1]  # Worker 2 of the EASGD cluster.
    assert task.cluster_dict() == {
        "ps": ["easgd-ps-0.default.svc:2222"],
        "worker": [CHIEF, *WORKERS],
    }


def test_the_evaluator_pod_is_refused_with_what_to_change():
    with pytest.raises(ClusterConfigError) as caught:
        tf_config.cluster_from_tf_config(_operator_tf_config(JOB, "evaluator", 0))
    assert str(caught.value) == (
        "TF_CONFIG task.type='evaluator': an EASGD job runs the types ['chief', 'master', 'ps', "
        "'worker']; it has no evaluator (the chief evaluates the centre), so give this task no "
        "TF_CONFIG evaluator entry (a TFJob: no Evaluator replicas)."
    )


def test_a_tfjob_with_dynamic_workers_is_refused():
    # enableDynamicWorker: true makes the operator write a "sparseCluster" with the worker's
    # own address only; the chief could not know the other workers.
    text = json.dumps(
        {
            "sparseCluster": {"worker": {"1": WORKERS[1]}, "ps": ["easgd-ps-0.default.svc:2222"]},
            "task": {"type": "worker", "index": 1},
        }
    )
    with pytest.raises(ClusterConfigError, match="set enableDynamicWorker: false"):
        tf_config.cluster_from_tf_config(text)


@pytest.mark.parametrize(
    ("replicas", "task_type", "index"),
    [
        (JOB, "chief", 0),
        (JOB, "worker", 1),
        (JOB, "ps", 0),
        (JOB, "evaluator", 0),
        ({"Master": 1, "Worker": 1, "PS": 2}, "ps", 1),
    ],
)
def test_tensorflows_resolver_reads_the_same_cluster_and_task(
    monkeypatch, replicas, task_type, index
):
    text = _operator_tf_config(replicas, task_type, index)
    monkeypatch.setenv("TF_CONFIG", text)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    ours = tf_config.read_tf_config()
    assert (ours.task_type, ours.task_index) == (resolver.task_type, resolver.task_id)
    assert {job: list(hosts) for job, hosts in ours.cluster.items()} == (
        resolver.cluster_spec().as_dict()
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 1),  # Local training.
        (_operator_tf_config(JOB, "evaluator", 0), 3),  # Chief + 2 workers, the same everywhere.
        (_operator_tf_config({"Master": 1, "Worker": 1, "PS": 1}, "ps", 0), 2),
    ],
)
def test_count_workers_and_session_config_read_the_same_tf_config(text, expected):
    assert tf_config.count_workers(text) == expected
    if text:  # The evaluator and the ps keep the Estimator's default session config.
        assert tf_config.session_config(text) is None


def test_a_cluster_task_gives_tensorflow_its_cluster_spec():
    task = ClusterTask(("p:1",), ("w:1", "w:2"), "worker", 1)
    assert task.cluster_spec().as_dict() == {"ps": ["p:1"], "worker": ["w:1", "w:2"]}
    assert (task.device, task.address, task.is_chief) == ("/job:worker/task:1", "w:2", False)


# --- A Slurm job step ------------------------------------------------------------------------


def _step(rank, nodelist="vm", tasks_per_node="3", job_id="7", **extra):
    """The SLURM_* variables slurmd gives task `rank` of a job step (block layout)."""
    counts = slurm.expand_tasks_per_node(tasks_per_node)
    blocks, first = [], 0  # (node, its first task, its number of tasks), node by node.
    for node, count in zip(slurm.expand_hostlist(nodelist), counts, strict=True):
        blocks.append((node, first, count))
        first += count
    node, first, count = next(block for block in blocks if rank < block[1] + block[2])
    env = {
        "SLURM_PROCID": str(rank),
        "SLURM_STEP_NUM_TASKS": str(sum(counts)),
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
        "SLURM_JOB_ID": job_id,
        "SLURMD_NODENAME": node,
        "SLURM_LOCALID": str(rank - first),
        "SLURM_GTIDS": ",".join(str(r) for r in range(first, first + count)),
    }
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("vm", ["vm"]),
        ("n[9-10]", ["n9", "n10"]),  # Slurm's order, not sorted by name.
        # Each range keeps the width of its first number, as `scontrol show hostnames` does.
        ("n[01-03,7],gpu1", ["n01", "n02", "n03", "n7", "gpu1"]),
        ("n[099-101]", ["n099", "n100", "n101"]),
        ("rack1-n[1-2],login", ["rack1-n1", "rack1-n2", "login"]),
    ],
)
def test_expand_hostlist(value, expected):
    assert slurm.expand_hostlist(value) == expected


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("n[1-2", "its brackets do not match"),
        ("n1,,n2", "a name is empty"),
        ("n[2-1]", "'2-1' in 'n\\[2-1\\]' is no number or range"),
        ("n[a-b]", "'a-b' in 'n\\[a-b\\]' is no number or range"),
        ("n[1-2]x", "cannot read 'n\\[1-2\\]x'"),
        ("a[1-2]b[3-4]", "cannot read 'a\\[1-2\\]b\\[3-4\\]'"),
    ],
)
def test_a_malformed_hostlist_names_the_variable(value, why):
    with pytest.raises(ClusterConfigError, match=rf"^SLURM_STEP_NODELIST='.*': {why}; expected"):
        slurm.expand_hostlist(value)


def test_expand_tasks_per_node():
    assert slurm.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    for bad in ("2(x0)", "0", "2x3", ""):
        with pytest.raises(ClusterConfigError, match=r"^SLURM_STEP_TASKS_PER_NODE="):
            slurm.expand_tasks_per_node(bad)


@pytest.mark.parametrize(
    ("rank", "job", "task_index", "address"),
    [
        # srun -n 3 on node vm, job 7: port base 20000 + 10 * 7 = 20070, task i of the node
        # on 20070 + i. Task 0 is the ps; task 1, worker 0, is the chief.
        (0, "ps", 0, "vm:20070"),
        (1, "worker", 0, "vm:20071"),
        (2, "worker", 1, "vm:20072"),
    ],
)
def test_a_step_on_one_node(rank, job, task_index, address):
    task = slurm.cluster_from_slurm(1, _step(rank))
    assert (task.job_name, task.task_index, task.address) == (job, task_index, address)
    assert task.ps_hosts == ("vm:20070",) and task.worker_hosts == ("vm:20071", "vm:20072")
    assert task.source == "Slurm"
    assert task.origin == f"Slurm task {rank} on node vm, port 20070 + {rank}"


def test_a_step_on_two_nodes_numbers_tasks_in_node_list_order():
    # n[9-10] with 2 tasks each: tasks 0, 1 on n9, 2, 3 on n10. --ps=2, job 123456:
    # base 20000 + 10 * 456 = 24560.
    tasks = [
        slurm.cluster_from_slurm(2, _step(r, "n[9-10]", "2(x2)", job_id="123456")) for r in range(4)
    ]
    assert {t.ps_hosts for t in tasks} == {("n9:24560", "n9:24561")}
    assert {t.worker_hosts for t in tasks} == {("n10:24560", "n10:24561")}
    assert [t.name for t in tasks] == ["ps 0", "ps 1", "worker 0", "worker 1"]


def test_an_explicit_port_base():
    task = slurm.cluster_from_slurm(1, _step(2), port_base=3000)
    assert task.worker_hosts == ("vm:3001", "vm:3002")


@pytest.mark.parametrize(
    ("environ", "num_ps", "port_base", "message"),
    [
        ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "3"}, 1, None,
         r"^SLURM_STEP_NUM_TASKS is not set: this process is not a task of a Slurm job step\. "
         r"Start the tasks with srun"),
        (_step(0, SLURM_PROCID="x"), 1, None, r"^SLURM_PROCID='x': expected an integer >= 0"),
        (_step(0, SLURM_PROCID="3"), 1, None,
         r"^SLURM_PROCID=3: the step has SLURM_STEP_NUM_TASKS=3 tasks"),
        (_step(0, SLURM_STEP_NUM_TASKS="4"), 1, None,
         r"SLURM_STEP_NODELIST='vm' and SLURM_STEP_TASKS_PER_NODE='3' do not describe "
         r"SLURM_STEP_NUM_TASKS=4 tasks"),
        (_step(0), 3, None, r"^num_ps=3: the step has SLURM_STEP_NUM_TASKS=3 tasks, and a job "
         r"needs at least 1 ps and 1 worker, so it must be in \[1, 3\)"),
        (_step(0), 0, None, r"^num_ps=0"),
        (_step(0), 1, 65534, r"^port_base=65534: a node runs up to 3 task\(s\) of the step, on "
         r"ports 65534 to 65536"),
        (_step(0, SLURM_JOB_ID="abc"), 1, None, r"^SLURM_JOB_ID='abc': expected an integer"),
    ],
)  # fmt: skip
def test_bad_slurm_variables_are_named(environ, num_ps, port_base, message):
    with pytest.raises(ClusterConfigError, match=message):
        slurm.cluster_from_slurm(num_ps, environ, port_base)


def test_a_cyclic_layout_is_refused_by_the_task_that_sees_it():
    # srun -n 4 -m cyclic on n[1-2]: tasks 0 and 2 on n1, 1 and 3 on n2. In blocks, task 1
    # would be on n1: task 1 (on n2) finds its node wrong, task 0 its neighbours.
    env = _step(1, "n[1-2]", "2(x2)", SLURMD_NODENAME="n2", SLURM_GTIDS="1,3")
    env["SLURM_DISTRIBUTION"] = "cyclic"
    with pytest.raises(ClusterConfigError) as caught:
        slurm.cluster_from_slurm(1, env)
    assert str(caught.value) == (
        "SLURMD_NODENAME='n2', but in blocks (SLURM_STEP_NODELIST='n[1-2]', "
        "SLURM_STEP_TASKS_PER_NODE='2(x2)') task 1 runs on 'n1': a ps/worker cluster from a "
        "Slurm step needs its tasks in blocks, node by node, as srun lays them out by default "
        "(--distribution=block); this step has SLURM_DISTRIBUTION='cyclic'."
    )
    with pytest.raises(ClusterConfigError, match=r"^SLURM_GTIDS='0,2': the tasks on 'n1', but"):
        slurm.cluster_from_slurm(1, _step(0, "n[1-2]", "2(x2)", SLURM_GTIDS="0,2"))


def _tf_slurm_resolver(monkeypatch, environ, jobs, port_base, **kwargs):
    """TensorFlow's SlurmClusterResolver for `environ`, without GPUs to hand out."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    tasks_on_a_node = max(slurm.expand_tasks_per_node(environ["SLURM_STEP_TASKS_PER_NODE"]))
    kwargs = {"gpus_per_node": tasks_on_a_node, "gpus_per_task": 1, **kwargs}
    return tf.distribute.cluster_resolver.SlurmClusterResolver(
        jobs=jobs, port_base=port_base, auto_set_gpu=False, **kwargs
    )


@pytest.mark.parametrize(
    ("nodelist", "tasks_per_node", "num_ps"),
    [("vm", "3", 1), ("n[1-2]", "2(x2)", 1), ("n[1-3]", "1(x3)", 2)],
)
def test_tensorflows_slurm_resolver_agrees_where_node_names_sort_in_slurms_order(
    monkeypatch, nodelist, tasks_per_node, num_ps
):
    # "ps" sorts before "worker", so TensorFlow's resolver also gives the ps the first tasks.
    num_tasks = sum(slurm.expand_tasks_per_node(tasks_per_node))
    jobs = {"ps": num_ps, "worker": num_tasks - num_ps}
    for rank in range(num_tasks):
        environ = _step(rank, nodelist, tasks_per_node)
        ours = slurm.cluster_from_slurm(num_ps, environ, port_base=8888)
        resolver = _tf_slurm_resolver(monkeypatch, environ, jobs, 8888)
        assert resolver.cluster_spec().as_dict() == ours.cluster_dict()
        assert resolver.get_task_info() == (ours.job_name, ours.task_index)


def test_tensorflows_slurm_resolver_misplaces_tasks_on_nodes_n9_and_n10(monkeypatch):
    # Slurm runs tasks 0 and 1 on n9 (first in "n[9-10]"); TensorFlow's resolver sorts the
    # names ("n10" < "n9") and gives task 0, the ps, an address on n10, where it does not run.
    environ = _step(0, "n[9-10]", "2(x2)")
    resolver = _tf_slurm_resolver(monkeypatch, environ, {"ps": 1, "worker": 3}, 8888)
    assert resolver.cluster_spec().as_dict()["ps"] == ["n10:8888"]
    assert slurm.cluster_from_slurm(1, environ, port_base=8888).ps_hosts == ("n9:8888",)


def test_tensorflows_slurm_resolver_needs_gpus(monkeypatch, tmp_path):
    # Without GPUs, it works only by claiming one per task (gpus_per_node=3, as above).
    environ = _step(0)
    jobs = {"ps": 1, "worker": 2}
    with pytest.raises(RuntimeError, match="Requested more GPUs per node than available"):
        _tf_slurm_resolver(monkeypatch, environ, jobs, 8888, gpus_per_node=0)
    # gpus_per_task=None: 0 // 3 = 0 GPUs per task, a range(0, 0, 0) in cluster_spec().
    resolver = _tf_slurm_resolver(
        monkeypatch, environ, jobs, 8888, gpus_per_node=0, gpus_per_task=None
    )
    with pytest.raises(ValueError, match="arg 3 must not be zero"):
        resolver.cluster_spec()
    # Its default asks nvidia-smi, which a node without GPUs lacks (here: no PATH).
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="nvidia-smi"):
        _tf_slurm_resolver(monkeypatch, environ, jobs, 8888, gpus_per_node=None)


# --- easgd-train picks the source ------------------------------------------------------------


@pytest.fixture
def parse():
    """Parses easgd-train's flags (with an environment) in this process; returns the Plan."""
    was_parsed = cli.FLAGS.is_parsed()

    def parse_(*args, environ):
        cli.FLAGS.unparse_flags()
        cli.FLAGS(["easgd-train", *args])
        return plan_from_flags(cli.FLAGS, environ=environ)

    with flagsaver.flagsaver():
        yield parse_
    cli.FLAGS.unparse_flags()
    if was_parsed:
        cli.FLAGS.mark_as_parsed()


def test_a_task_of_a_slurm_step_is_a_task_without_flags(parse):
    # srun -n 3 easgd-train: task mode, the cluster from the step, 1 ps by default.
    plan = parse("--model_dir=/tmp/x", environ=_step(1))
    assert plan.task.source == "Slurm" and plan.task.is_chief
    assert (plan.num_ps, plan.num_workers) == (1, 2)
    plan = parse("--cluster=task", "--ps=2", "--workers=1", environ=_step(2))
    assert (plan.task.name, plan.task.address) == ("worker 0", "vm:20072")
    assert parse("--slurm_port_base=4000", environ=_step(0)).task.address == "vm:4000"


def test_tf_config_and_flags_win_over_the_slurm_step(parse):
    text = _operator_tf_config(JOB, "chief", 0)
    assert parse(environ={**_step(1), "TF_CONFIG": text}).task.source == "TF_CONFIG"
    flags = ("--job_name=ps", "--ps_hosts=a:1", "--worker_hosts=b:1")
    assert parse(*flags, environ=_step(1)).task.source == "flags"


def test_a_step_of_one_task_runs_a_local_job(parse):
    # srun -n 1 easgd-train (or an sbatch script without srun): the whole job here.
    assert parse(environ=_step(0, tasks_per_node="1")).task is None
    assert parse(environ={"SLURM_JOB_ID": "7", "SLURM_PROCID": "0"}).task is None


@pytest.mark.parametrize(
    ("args", "environ", "message"),
    [
        (["--workers=3"], _step(0),
         "--workers=3: the Slurm job step has 3 tasks, 1 of them ps (--ps=1), so it has 2 "
         "worker(s); leave --workers out or make the two agree."),
        (["--ps=3"], _step(0), "--ps=3: the step has SLURM_STEP_NUM_TASKS=3 tasks"),
        (["--max_restarts=1"], _step(0), "--max_restarts=1 applies to --cluster=local only; "
         "the tasks of a Slurm job step are restarted by whoever starts them"),
        (["--slurm_port_base=4000"], {}, "--slurm_port_base=4000 applies to the tasks of a "
         "Slurm job step only"),
        (["--slurm_port_base=65535"], _step(0), "--slurm_port_base=65535: a node runs up to 3"),
        (["--cluster=task"], {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0"},
         "neither is set. This process is in Slurm job 7 but in no job step: start the tasks "
         "with srun (in an sbatch script: srun easgd-train ...)."),
        (["--cluster=task"], {**_step(0), "SLURM_STEP_NODELIST": "n[1"},
         "SLURM_STEP_NODELIST='n[1': its brackets do not match"),
    ],
)  # fmt: skip
def test_bad_slurm_input_names_the_flag_or_variable(parse, args, environ, message):
    with pytest.raises(UsageError) as caught:
        parse(*args, environ=environ)
    assert message in str(caught.value)


def test_a_port_in_use_names_the_slurm_task_and_the_flag(parse):
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        plan = parse(f"--slurm_port_base={port}", environ=_step(0))
        with pytest.raises(UsageError) as caught:
            preflight.check_port(plan.task)
    assert str(caught.value) == (
        f"ps 0 ('vm:{port}', Slurm task 0 on node vm, port {port} + 0): port {port} is already "
        f"in use on this machine (`ss -ltnp 'sport = :{port}'` shows by what); stop that "
        "process or give the job other ports with --slurm_port_base."
    )


# --- examples/tfjob.yaml, as the operator runs it --------------------------------------------

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _manifests(name):
    """`{kind: document}` of an examples/ manifest (PyYAML or a skip)."""
    yaml = pytest.importorskip("yaml")
    with open(EXAMPLES / name, encoding="utf-8") as file:
        return {document["kind"]: document for document in yaml.safe_load_all(file)}


@pytest.mark.parametrize(
    ("replica", "index", "job", "task_index"),
    [("Chief", 0, "worker", 0), ("Worker", 0, "worker", 1), ("Worker", 1, "worker", 2),
     ("PS", 0, "ps", 0)],
)  # fmt: skip
def test_each_pod_of_the_example_tfjob_runs_its_task(parse, replica, index, job, task_index):
    tfjob = _manifests("tfjob.yaml")["TFJob"]
    specs = tfjob["spec"]["tfReplicaSpecs"]
    replicas = {kind: spec["replicas"] for kind, spec in specs.items()}
    name = tfjob["metadata"]["name"]
    text = _operator_tf_config(replicas, replica.lower(), index, job=name, namespace="easgd")
    [container] = specs[replica]["template"]["spec"]["containers"]
    assert container["command"] == ["easgd-train"]
    plan = parse(*container["args"], environ={"TF_CONFIG": text})
    assert (plan.task.job_name, plan.task.task_index) == (job, task_index)
    assert plan.task.num_workers == 3 and plan.task.num_ps == 1
    assert plan.task.ps_hosts == ("easgd-digits-ps-0.easgd.svc:2222",)
    assert plan.task.worker_hosts[0] == "easgd-digits-chief-0.easgd.svc:2222"


def test_the_tfjob_examples_network_policy_admits_only_the_jobs_pods_to_their_ports():
    documents = _manifests("tfjob.yaml")
    assert sorted(documents) == ["NetworkPolicy", "TFJob"]
    policy = documents["NetworkPolicy"]["spec"]
    job = documents["TFJob"]
    selector = policy["podSelector"]["matchLabels"]
    # It selects every pod of the job, in the job's namespace (none is named: the same).
    assert "namespace" not in documents["NetworkPolicy"]["metadata"]
    assert "namespace" not in job["metadata"]
    ports = set()
    for replica in job["spec"]["tfReplicaSpecs"].values():
        template = replica["template"]
        assert selector.items() <= template["metadata"]["labels"].items()
        ports |= {port["containerPort"] for port in template["spec"]["containers"][0]["ports"]}
    # Ingress only, one rule: from the job's pods, to the task port. Any other ingress into
    # the selected pods is denied.
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": selector}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": port} for port in sorted(ports)]
    assert ports == {2222}


def test_the_example_tfjob_restarts_limits_and_shares_its_model_dir():
    tfjob = _manifests("tfjob.yaml")["TFJob"]
    [claim] = _manifests("tfjob-storage.yaml").values()
    assert claim["kind"] == "PersistentVolumeClaim"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # Every pod writes.
    assert tfjob["spec"]["runPolicy"]["activeDeadlineSeconds"] > 0  # Bounds the restarts.
    for kind, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        # Exit codes 1 and 2 (failed, bad input) are final; 128 and up (killed) restart.
        assert spec["restartPolicy"] == "ExitCode", kind
        pod = spec["template"]["spec"]
        [container] = pod["containers"]
        assert container["name"] == "tensorflow"  # Where the operator puts TF_CONFIG.
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        resources = container["resources"]
        assert resources["requests"]["memory"] == resources["limits"]["memory"], kind
        assert {"cpu", "memory"} <= resources["limits"].keys()
        model_dir = next(a.split("=", 1)[1] for a in container["args"] if "--model_dir=" in a)
        # Every pod mounts the shared --model_dir, the ps too: it writes the checkpoints'
        # data, and reads it back when the chief restores (test_task.py).
        [volume] = pod["volumes"]
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        [mount] = container["volumeMounts"]
        assert mount["name"] == volume["name"]
        assert model_dir.startswith(mount["mountPath"] + "/"), kind
