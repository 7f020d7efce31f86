"""Tests of tf_contrib_easgd.trainer.cluster: host lists, TF_CONFIG, roles, device filters."""

import json

import pytest
import tensorflow as tf

from tf_contrib_easgd.cluster import resolver as cluster_resolver
from tf_contrib_easgd.trainer import cluster
from tf_contrib_easgd.trainer.cluster import ClusterConfigError

PS = "ps0.example.com:2222"
W0, W1, W2 = "w0.example.com:2222", "w1.example.com:2222", "w2.example.com:2222"


def test_from_flags_describes_the_task():
    task = cluster.from_flags("worker", 1, PS, f"{W0},{W1}")
    assert task == cluster.TaskConfig((PS,), (W0, W1), "worker", 1, source="flags")
    assert (task.num_ps, task.num_workers) == (1, 2)
    assert not task.is_chief and not task.is_ps
    assert task.name == "worker 1"
    assert task.device == "/job:worker/task:1"
    assert task.address == W1
    assert task.cluster_dict() == {"ps": [PS], "worker": [W0, W1]}


def test_worker_zero_is_the_chief_and_a_ps_is_not():
    assert cluster.from_flags("worker", 0, PS, W0).is_chief
    ps = cluster.from_flags("ps", 0, PS, W0)
    assert ps.is_ps and not ps.is_chief and ps.address == PS


def test_to_flags_round_trips():
    task = cluster.from_flags("ps", 1, f"{PS},ps1:1", f"{W0},{W1}")
    flags = dict(flag[2:].split("=", 1) for flag in task.to_flags())
    assert (
        cluster.from_flags(
            flags["job_name"], int(flags["task_index"]), flags["ps_hosts"], flags["worker_hosts"]
        )
        == task
    )


def test_device_filters_keep_a_worker_independent_of_other_workers():
    # A worker's session may depend on every ps and on itself only (contrib fix 10);
    # a ps's own session (waiting for the end of the job) needs only itself.
    worker = cluster.from_flags("worker", 1, f"{PS},ps1:1", f"{W0},{W1},{W2}")
    assert worker.device_filters() == ["/job:ps", "/job:worker/task:1"]
    assert list(worker.session_config().device_filters) == ["/job:ps", "/job:worker/task:1"]
    ps = cluster.from_flags("ps", 1, f"{PS},ps1:1", W0)
    assert ps.device_filters() == ["/job:ps/task:1"]


def test_cluster_spec():
    spec = cluster.from_flags("worker", 0, PS, f"{W0},{W1}").cluster_spec()
    assert isinstance(spec, tf.compat.v1.train.ClusterSpec)
    assert spec.as_dict() == {"ps": [PS], "worker": [W0, W1]}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a:1", ("a:1",)),
        ("a:1, b:65535", ("a:1", "b:65535")),
        ("10.0.0.1:2222", ("10.0.0.1:2222",)),
        ("[::1]:2222", ("[::1]:2222",)),
    ],
)
def test_parse_hosts(value, expected):
    assert cluster_resolver.parse_hosts(value, "--ps_hosts") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "expected a comma-separated list of host:port addresses"),
        ("localhost", "address 'localhost' is not of the form host:port"),
        ("a:1,,b:2", "address '' is not of the form host:port"),
        (":2222", "address ':2222' is not of the form host:port"),
        ("a:0", r"has port '0'; a port is a number in \[1, 65535\]"),
        ("a:70000", "has port '70000'"),
        ("a:http", "has port 'http'"),
        ("a b:1", "is not of the form host:port"),
        ("a:1,a:1", "address 'a:1' is listed twice"),
    ],
)
def test_parse_hosts_rejects_malformed_lists_naming_flag_and_value(value, message):
    with pytest.raises(ClusterConfigError, match=message) as caught:
        cluster_resolver.parse_hosts(value, "--worker_hosts")
    assert str(caught.value).startswith(f"--worker_hosts={value!r}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("chief", 0, PS, W0), r"--job_name='chief': expected one of \['ps', 'worker'\]"),
        (("worker", 2, PS, f"{W0},{W1}"), r"--task_index=2: job 'worker' has 2 task\(s\) in "
         r"--worker_hosts, so the index must be in \[0, 2\)"),
        (("ps", 1, PS, W0), r"--task_index=1: job 'ps' has 1 task\(s\) in --ps_hosts"),
        (("worker", 0, "nope", W0), "--ps_hosts='nope'"),
        (("worker", 0, PS, f"{W0},{PS}"), r"--ps_hosts and --worker_hosts share the address"),
    ],
)  # fmt: skip
def test_from_flags_errors(args, message):
    with pytest.raises(ClusterConfigError, match=message):
        cluster.from_flags(*args)


def _tf_config(task, **cluster_lists):
    return json.dumps({"cluster": cluster_lists, "task": task})


@pytest.mark.parametrize(
    ("task", "expected_job", "expected_index"),
    [
        # The chief is worker 0; TF_CONFIG's worker i is worker i + 1.
        ({"type": "chief", "index": 0}, "worker", 0),
        ({"type": "worker", "index": 0}, "worker", 1),
        ({"type": "worker", "index": 1}, "worker", 2),
        ({"type": "ps", "index": 0}, "ps", 0),
    ],
)
def test_tf_config_maps_chief_to_worker_zero(task, expected_job, expected_index):
    text = _tf_config(task, chief=[W0], worker=[W1, W2], ps=[PS], evaluator=["e:1"])
    parsed = cluster.from_tf_config(text)
    assert parsed.worker_hosts == (W0, W1, W2)  # The evaluator is not part of training.
    assert parsed.ps_hosts == (PS,)
    assert (parsed.job_name, parsed.task_index) == (expected_job, expected_index)
    assert parsed.source == "TF_CONFIG"


def test_tf_config_without_chief_keeps_worker_indices():
    text = _tf_config({"type": "worker", "index": 1}, worker=[W0, W1], ps=[PS])
    parsed = cluster.from_tf_config(text)
    assert (parsed.task_index, parsed.is_chief, parsed.worker_hosts) == (1, False, (W0, W1))
    first = cluster.from_tf_config(_tf_config({"type": "worker"}, worker=[W0, W1], ps=[PS]))
    assert first.is_chief  # "index" defaults to 0.


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"TF_CONFIG='\{not json' is not valid JSON"),
        ("[]", "expected an object with a 'cluster' object"),
        ('{"task": {}}', "expected an object with a 'cluster' object"),
        (_tf_config({"type": "worker"}, worker=[W0], ps=[PS], trainer=["m:1"]),
         r"TF_CONFIG cluster has job\(s\) \['trainer'\]; the task types are \['chief', "
         r"'evaluator', 'master', 'ps', 'worker'\]"),
        (_tf_config({"type": "worker"}, worker=[W0], ps=[PS], chief=["c:1"], master=["m:1"]),
         r"TF_CONFIG cluster \{'chief': \['c:1'\], 'master': \['m:1'\]\}: at most one chief"),
        (json.dumps({"sparseCluster": {"ps": [PS], "worker": {"1": W1}},
                     "task": {"type": "worker", "index": 1}}),
         "TF_CONFIG has a 'sparseCluster' and no 'cluster' .* set enableDynamicWorker: false"),
        (json.dumps({"cluster": {"worker": [W0], "ps": [PS]}, "rpc_layer": "grpc+verbs"}),
         r"TF_CONFIG rpc_layer='grpc\+verbs': the tasks' servers speak 'grpc' only"),
        (_tf_config({"type": "worker"}, worker=W0, ps=[PS]),
         "TF_CONFIG cluster.worker='w0.example.com:2222': expected a list"),
        (_tf_config({"type": "worker"}, worker=["w0"], ps=[PS]),
         "TF_CONFIG cluster.worker=.*address 'w0' is not of the form host:port"),
        (_tf_config({"type": "worker"}, worker=[W0]), "TF_CONFIG cluster has no 'ps' task"),
        (_tf_config({"type": "ps"}, ps=[PS]),
         "TF_CONFIG cluster has no 'chief', 'master' or 'worker' task"),
        (_tf_config({"type": "chief"}, chief=[W0, W1], ps=[PS]), "at most one chief"),
        (_tf_config({"type": "worker"}, worker=[W0, W0], ps=[PS]), "listed twice"),
        (json.dumps({"cluster": {"worker": [W0], "ps": [PS]}}), "TF_CONFIG task=None"),
        (_tf_config({"type": "evaluator", "index": 0}, worker=[W0], ps=[PS]),
         r"TF_CONFIG task.type='evaluator': an EASGD job runs the types \['chief', 'master', "
         r"'ps', 'worker'\]; it has no evaluator \(the chief evaluates the centre\)"),
        (_tf_config({"type": "Worker"}, worker=[W0], ps=[PS]),
         r"TF_CONFIG task.type='Worker': the task types are \['chief', 'evaluator', "),
        (_tf_config({"type": "worker", "index": "0"}, worker=[W0], ps=[PS]),
         "TF_CONFIG task.index='0': expected an integer"),
        (_tf_config({"type": "worker", "index": 1}, worker=[W0], ps=[PS]),
         r"TF_CONFIG task.index=1: cluster.worker has 1 task\(s\)"),
        (_tf_config({"type": "ps", "index": -1}, worker=[W0], ps=[PS]), "task.index=-1"),
        (_tf_config({"type": "worker", "index": 3}, chief=[W0], worker=[W1, W2], ps=[PS]),
         r"TF_CONFIG task.index=3: cluster.worker has 2 task\(s\), so the index must be in "
         r"\[0, 2\)"),
        ("", "TF_CONFIG is not set"),
        (_tf_config({"type": "chief", "index": 0}, worker=[W0, W1], ps=[PS]),
         r"TF_CONFIG task.type='chief': the cluster has no 'chief' task \(cluster.chief is "
         r"missing or empty; it has \['ps', 'worker'\]\)"),
        (_tf_config({"type": "worker", "index": 0}, chief=[W0], worker=[], ps=[PS]),
         "TF_CONFIG task.type='worker': the cluster has no 'worker' task"),
    ],
)  # fmt: skip
def test_tf_config_errors_name_the_part_and_the_value(text, message):
    with pytest.raises(ClusterConfigError, match=message):
        cluster.from_tf_config(text)
