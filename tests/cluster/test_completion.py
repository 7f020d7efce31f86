"""The end of a job (tf_contrib_easgd/job/completion.py): done reports, the chief's wait, ps stop.

Each test has a cluster of its own: the queues live in the servers' default container and
in-process servers cannot be stopped, so a token left behind would reach the next test.
"""

import logging
import threading
import time

import pytest
import tensorflow as tf
from clusters import InProcessCluster

import tf_contrib_easgd

DEADLINE_SECS = 20


@pytest.fixture
def cluster():
    return InProcessCluster(num_ps=2, num_workers=3)


def _completion(cluster, index):
    """(graph, TrainingCompletion) of worker `index`; worker 0 is the chief."""
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.device(f"/job:worker/task:{index}"):
        completion = tf_contrib_easgd.TrainingCompletion(cluster.spec, index == 0, index)
    return graph, completion


def _in_thread(function, *args):
    """Starts `function(*args)` in a thread; returns (thread, results list)."""
    results = []
    thread = threading.Thread(target=lambda: results.append(function(*args)), daemon=True)
    thread.start()
    return thread, results


def test_the_chief_waits_for_every_worker_then_the_ps_stop(cluster):
    servers = [
        _in_thread(tf_contrib_easgd.serve_until_done, cluster.servers["ps", i]) for i in range(2)
    ]
    graphs = dict(enumerate(_completion(cluster, i) for i in range(3)))
    (chief_graph, chief), (graph1, one), (graph2, two) = graphs.values()
    with cluster.session(0, chief_graph) as session:
        waiting, finished = _in_thread(chief.finish, session, 30, DEADLINE_SECS)
        with cluster.session(1, graph1) as session1:
            one.finish(session1, 12)
        time.sleep(0.5)
        assert waiting.is_alive()  # One report of two: the chief still waits.
        with cluster.session(2, graph2) as session2:
            assert two.finish(session2, 7) is None
        waiting.join(DEADLINE_SECS)
    assert finished == [tf_contrib_easgd.FinishedWorkers(local_steps={1: 12, 2: 7}, missing=[])]
    # The servers serve until the chief says the job is done, and only then return.
    assert all(thread.is_alive() for thread, _ in servers)
    two.stop_parameter_servers(cluster.target(2))  # Not the chief: nothing happens.
    time.sleep(0.5)
    assert all(thread.is_alive() for thread, _ in servers)
    chief.stop_parameter_servers(cluster.target(0))
    for thread, _ in servers:
        thread.join(DEADLINE_SECS)
        assert not thread.is_alive()


def test_the_chief_goes_on_after_its_deadline_and_warns(cluster, caplog):
    graphs = [_completion(cluster, i) for i in range(2)]
    with cluster.session(1, graphs[1][0]) as session:
        graphs[1][1].finish(session, 5)
    started = time.monotonic()
    with (
        caplog.at_level(logging.WARNING),
        cluster.session(0, graphs[0][0]) as session,
    ):
        finished = graphs[0][1].finish(session, 5, timeout_secs=0.5)
    assert time.monotonic() - started < DEADLINE_SECS
    # Worker 2 never reported: the chief says so, and returns what it has.
    assert finished == tf_contrib_easgd.FinishedWorkers(local_steps={1: 5}, missing=[2])
    assert "Workers [2] did not report done within 0.5 s" in caplog.text


def test_a_job_whose_chief_died_is_stopped_from_outside(cluster):
    servers = [
        _in_thread(tf_contrib_easgd.serve_until_done, cluster.servers["ps", i]) for i in range(2)
    ]
    tf_contrib_easgd.stop_parameter_servers(cluster.spec, timeout_secs=DEADLINE_SECS)
    for thread, _ in servers:
        thread.join(DEADLINE_SECS)
        assert not thread.is_alive()


@pytest.mark.parametrize(
    ("jobs", "is_chief", "task_index", "others"),
    [
        # Worker 0 is the chief: it waits for workers 1 and 2.
        ({"ps": ["p:1"], "worker": ["a:1", "b:1", "c:1"]}, True, 0, [1, 2]),
        # A TF_CONFIG-style "chief" job: the chief waits for every task of "worker".
        ({"ps": ["p:1"], "chief": ["c:1"], "worker": ["a:1", "b:1"]}, True, 0, [0, 1]),
        # One worker alone waits for nobody.
        ({"ps": ["p:1"], "worker": ["a:1"]}, True, 0, []),
    ],
)
def test_the_chief_waits_for_the_other_workers_of_the_cluster(jobs, is_chief, task_index, others):
    with tf.Graph().as_default():
        completion = tf_contrib_easgd.TrainingCompletion(jobs, is_chief, task_index)
    assert completion.others == others


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        ({"worker": ["a:1"]}, "cluster has no 'ps' tasks"),
        ({"ps": ["p:1"]}, "cluster has no 'worker' or 'chief' tasks"),
    ],
)
def test_a_cluster_without_ps_or_workers_is_refused(jobs, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        tf_contrib_easgd.TrainingCompletion(jobs, True, 0)
