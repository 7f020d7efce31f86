"""The 16-bit wire (`wire_dtype`): its moves worked by hand, its references, its bytes.

One worker trains w against a centre on a ps task of the in-process cluster. The loss
-g * w with plain SGD at learning rate 1 adds g = 0.12548828125 = 2^-3 * (1 + 2^-8) to w
at every local step: a difference that bfloat16 (8 significant bits) cannot hold, so the
first exchange rounds it, while float16 (11 bits) holds it.
"""

import time

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from clusters import worker_scope
from exchange_graphs import wire_references as _references

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.wire import REFERENCE_SCOPE

GRADIENT_STEP = 0.12548828125  # 2^-3 * (1 + 2^-8)


DEADLINE_SECS = 30


def _build(cluster, container, index=0, **optimizer_kwargs):
    """Worker `index`'s graph: w = 1 under the getter, period 1, alpha 0.5, rho 0.

    Returns:
        (opt, train_op, the reads of a row: w, local centre, global centre, global_step,
        then the reference if there is one).
    """
    getter = ElasticAverageCustomGetter(f"/job:worker/task:{index}")
    with worker_scope(cluster.spec, index, getter, container):
        w = tf.compat.v1.get_variable("w", initializer=tf.constant(1.0))
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter,
            communication_period=1, moving_rate=0.5, rho=0.0, **optimizer_kwargs,
        )  # fmt: skip
        train_op = opt.minimize(-GRADIENT_STEP * w, global_step=global_step)
    entry = getter.find(w)
    references = _references()
    variables = [w, entry.local_center, entry.global_center, global_step, *references]
    return opt, train_op, [variable.read_value() for variable in variables]


def _start(cluster, graph, opt, share_devices):
    """A session of worker 0 on `graph`, started as the optimizer's hook would."""
    session = cluster.session(0, graph, share_devices)
    session.run(tf.compat.v1.global_variables_initializer())
    session.run(tf.compat.v1.local_variables_initializer())
    session.run(opt.get_init_op(0))
    opt.choose_exchange_transport(session)
    return session


# Rows (w, local centre, global centre, global_step, reference) after each step.
# bfloat16, exchange 1: w = 1 + g; s = bf16(w - local centre) = bf16(2^-3 (1 + 2^-8)),
#   a tie that rounds to even: 0.125; e = bf16(centre - reference) = 0; d = 0.5 (s - e)
#   = 0.0625: centre 1.0625, w = 1.12548828125 - 0.0625 = 1.06298828125; local centre and
#   reference += e: 1. (Exact EASGD would give 1.062744140625 to both.)
# Exchange 2: w = 1.06298828125 + g = 1.1884765625; s = bf16(0.1884765625), which bfloat16
#   holds (2^-3 (1 + 2^-1 + 2^-7)); e = bf16(0.0625) = 0.0625; d = 0.5 (0.1884765625 -
#   0.0625) = 0.06298828125: centre = w = 1.12548828125; local centre = reference = 1.0625.
#   The 2^-11 that exchange 1 rounded away stayed in w and was sent here: both are where
#   exact EASGD puts them.
# Exchange 3: w = 1.2509765625; s = bf16(0.1884765625) again; e = bf16(0.06298828125), held
#   (2^-4 (1 + 2^-7)); d = 0.5 (0.1884765625 - 0.06298828125) = 0.062744140625: centre =
#   w = 1.188232421875; local centre = reference = 1.12548828125.
BFLOAT16_ROWS = [
    (1.06298828125, 1.0, 1.0625, 1, 1.0),
    (1.12548828125, 1.0625, 1.12548828125, 2, 1.0625),
    (1.188232421875, 1.12548828125, 1.188232421875, 3, 1.12548828125),
]


# float16 holds every difference here: the moves are exact EASGD's, d = 0.5 (w - centre).
# Exchange 1: d = 0.0627441..., centre = w = 1.062744140625, local centre = reference = 1;
# exchange 2: e = 0.062744140625: local centre = reference = 1.062744140625; and so on.
FLOAT16_ROWS = [
    (1.062744140625, 1.0, 1.062744140625, 1, 1.0),
    (1.12548828125, 1.062744140625, 1.12548828125, 2, 1.062744140625),
    (1.188232421875, 1.12548828125, 1.188232421875, 3, 1.12548828125),
]


@pytest.mark.parametrize("share_devices", [True, False], ids=["direct", "remote_call"])
@pytest.mark.parametrize(
    ("wire_dtype", "expected"),
    [(tf.bfloat16, BFLOAT16_ROWS), ("float16", FLOAT16_ROWS)],
    ids=["bfloat16", "float16"],
)
def test_exchanges_worked_by_hand(world, cluster, container, share_devices, wire_dtype, expected):
    with tf.Graph().as_default() as graph:
        opt, train_op, reads = _build(cluster, container, wire_dtype=wire_dtype)
        with _start(cluster, graph, opt, share_devices) as session:
            transport = opt.choose_exchange_transport(session)
            assert transport == ("direct" if share_devices else "remote_call")
            observed = []
            for _ in expected:
                session.run(train_op)
                observed.append(tuple(session.run(reads)))
    assert observed == expected


def test_overlapped_exchanges_worked_by_hand(world, cluster, container):
    # Each move lands at the next exchange step, before the copy is queued.
    # Step 1: w = 1 + g, sends s = 0.125 (as above): centre 1.0625, reference 1; the reply
    #   (d = 0.0625, local centre + e = 1) waits.
    # Step 2: w = 1.2509765625, lands d: 1.1884765625, local centre 1; sends
    #   s = bf16(0.1884765625), e = 0.0625: d = 0.06298828125, centre 1.12548828125,
    #   reference 1.0625.
    # Step 3: w = 1.31396484375, lands: 1.2509765625, local centre 1.0625; sends
    #   s = bf16(0.1884765625), e = bf16(0.06298828125): d = 0.062744140625, centre
    #   1.188232421875, reference 1.12548828125.
    # The finish op lands the last reply: w = 1.188232421875, local centre 1.12548828125.
    expected = [
        (1.12548828125, 1.0, 1.0625, 1, 1.0),
        (1.1884765625, 1.0, 1.12548828125, 2, 1.0625),
        (1.2509765625, 1.0625, 1.188232421875, 3, 1.12548828125),
    ]
    with tf.Graph().as_default() as graph:
        opt, train_op, reads = _build(cluster, container, wire_dtype="bfloat16", overlap=True)
        finish = opt.get_finish_op()
        coordinator = tf.train.Coordinator()
        with _start(cluster, graph, opt, share_devices=True) as session:
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            observed = []
            for step in range(1, len(expected) + 1):
                session.run(train_op)
                _wait_for(lambda step=step: session.run(reads[3]) >= step)
                # The runner has moved the centre; its next step waits for a copy and
                # must not touch the reference before it comes.
                time.sleep(0.05)
                observed.append(tuple(session.run(reads)))
            session.run(finish)
            assert session.run(reads[:2]) == [1.188232421875, 1.12548828125]
            coordinator.request_stop()
            coordinator.join(threads, stop_grace_period_secs=DEADLINE_SECS)
    assert observed == expected


@pytest.mark.parametrize("wire_dtype", [None, "bfloat16"])
def test_overlapped_moves_match_float32_arithmetic_to_the_bit(
    world, cluster, container, wire_dtype
):
    # 20 overlapped exchanges (period 1, alpha 0.3) of 1000 values with random gradient
    # steps, replayed in NumPy float32 (ml_dtypes' bfloat16 rounds to nearest even, as
    # TensorFlow's cast does). Each exchange step lands the reply in flight, then queues
    # the copy; the runner moves the centre by alpha * (copy - centre) and replies with
    # the difference it scaled (and the centre, or e): the worker subtracts alpha times
    # that same difference, rounded the same way.
    bf16, f32 = ml_dtypes.bfloat16, np.float32
    alpha = f32(0.3)
    rng = np.random.default_rng(1)
    initial = rng.normal(size=1000).astype(f32)
    getter = ElasticAverageCustomGetter("/job:worker/task:0")
    with tf.Graph().as_default() as graph:
        with worker_scope(cluster.spec, 0, getter, container):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(initial))
            step = tf.compat.v1.placeholder(tf.float32, [1000])
            global_step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter,
                communication_period=1, moving_rate=0.3, rho=0.0, overlap=True,
                wire_dtype=wire_dtype,
            )  # fmt: skip
            train_op = opt.minimize(-tf.reduce_sum(step * w), global_step=global_step)
        entry = getter.find(w)
        coordinator = tf.train.Coordinator()
        with _start(cluster, graph, opt, share_devices=True) as session:
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            x, centre, local, reference, reply = initial, initial, initial, initial, None
            for count in range(1, 21):
                gradient_step = rng.normal(scale=0.01, size=1000).astype(f32)
                session.run(train_op, {step: gradient_step})
                _wait_for(lambda count=count: session.run(global_step) >= count)
                x = x - f32(1.0) * -gradient_step  # w - lr * gradient, lr 1.
                if reply is not None:
                    difference, received = reply
                    local = local + received if wire_dtype else received
                    x = x - alpha * difference
                if wire_dtype:
                    sent = (x - local).astype(bf16).astype(f32)
                    e = (centre - reference).astype(bf16).astype(f32)
                    centre = centre - alpha * (e - sent)
                    reference = reference + e
                    reply = (sent - e, e)
                else:
                    read = centre
                    centre = centre - alpha * (centre - x)
                    reply = (x - read, read)
                observed = session.run([w, entry.local_center, entry.global_center])
                np.testing.assert_array_equal(observed[0], x)
                np.testing.assert_array_equal(observed[1], local)
                np.testing.assert_array_equal(observed[2], centre)
            coordinator.request_stop()
            coordinator.join(threads, stop_grace_period_secs=DEADLINE_SECS)


def _wait_for(condition):
    deadline = time.monotonic() + DEADLINE_SECS
    while not condition():
        assert time.monotonic() < deadline, "the exchange did not happen in time"
        time.sleep(0.005)


def test_rounding_does_not_accumulate(world, cluster, container):
    # 300 exchanges of a 1000-value variable that wanders: each local step adds a random
    # gradient step. The reference and the local centre stay equal to the bit (both move
    # by the same e), the worker and the centre by the same d, so w + centre changes only
    # by the local steps; and the local centre stays within one rounding of the centre
    # it was sent, however many exchanges went before.
    rng = np.random.default_rng(0)
    getter = ElasticAverageCustomGetter("/job:worker/task:0")
    with tf.Graph().as_default() as graph:
        with worker_scope(cluster.spec, 0, getter, container):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(rng.normal(size=1000)))
            step = tf.compat.v1.placeholder(tf.float64, [1000])
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter,
                communication_period=1, moving_rate=0.3, rho=0.0, wire_dtype=tf.bfloat16,
            )  # fmt: skip
            train_op = opt.minimize(-tf.reduce_sum(step * w))
        entry = getter.find(w)
        (reference,) = _references()
        reads = [w, entry.local_center, entry.global_center, reference]
        with _start(cluster, graph, opt, share_devices=True) as session:
            total = np.sum(session.run([w, entry.global_center]), axis=0)
            for _ in range(300):
                gradient_step = rng.normal(scale=0.01, size=1000)
                session.run(train_op, {step: gradient_step})
                total += gradient_step
                worker, local, centre, ref = session.run(reads)
                np.testing.assert_array_equal(local, ref)
            np.testing.assert_allclose(worker + centre, total, rtol=0, atol=1e-9)
            # The centre moved on by this exchange's d after it was sent: undo it.
            sent_centre = centre - 0.3 * (worker - centre) / 0.7
            assert np.max(np.abs(local - sent_centre)) < 0.1


def test_references_belong_to_the_worker_and_no_checkpoint(world, cluster, container):
    with tf.Graph().as_default():
        getter = ElasticAverageCustomGetter("/job:worker/task:1")
        with worker_scope(cluster.spec, 1, getter, container):
            a = tf.compat.v1.get_variable("a", [3])
            b = tf.compat.v1.get_variable("b", [2], dtype=tf.float64)
            c = tf.compat.v1.get_variable("c", [2, 2])
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), 2, getter, rho=0.0,
                wire_dtype=tf.bfloat16,
            )  # fmt: skip
            loss = tf.reduce_sum(a) + tf.cast(tf.reduce_sum(b), tf.float32) + tf.reduce_sum(c)
            opt.minimize(loss)
            later = tf.compat.v1.get_variable("later", [1], trainable=False)
        references = {v.op.name: v for v in _references()}
        assert sorted(references) == [f"{REFERENCE_SCOPE}/worker_1/{name}" for name in "abc"]
        for name, variable in (("a", a), ("b", b), ("c", c)):
            centre = getter.find(variable).global_center
            reference = references[f"{REFERENCE_SCOPE}/worker_1/{name}"]
            assert reference.device == centre.device
            assert reference.dtype.base_dtype == centre.dtype.base_dtype
            assert reference.shape == centre.shape
        # Not global: in no checkpoint. And the device setter's round robin did not count
        # them: the centres of a, b, c went to ps 0, 1, 0, so `later` goes to ps 1 (had
        # the three references been counted, to ps 0).
        assert not set(references.values()) & set(tf.compat.v1.global_variables())
        assert [getter.find(v).global_center.device for v in (a, b, c)] == [
            "/job:ps/task:0",
            "/job:ps/task:1",
            "/job:ps/task:0",
        ]
        assert later.device == "/job:ps/task:1"


def test_what_crosses_the_wire_is_16_bit(world, cluster, container):
    # In the direct calls (w's centre on ps 0, the global step on ps 1), every tensor that
    # a ps op takes from a worker op, and every one a worker op takes from a ps op, is
    # bfloat16, but the global step's increment (int64).
    with tf.Graph().as_default() as graph:
        _build(cluster, container, wire_dtype=tf.bfloat16)
        functions = [
            f for f in graph.as_graph_def().library.function if "_direct" in f.signature.name
        ]
    assert len(functions) == 2
    crossing = []
    for function in functions:
        nodes = {node.name: node for node in function.node_def}
        for node in function.node_def:
            for source in node.input:
                producer = nodes.get(source.lstrip("^").split(":")[0])
                if source.startswith("^") or producer is None:
                    continue
                if ("job:ps" in producer.device) != ("job:ps" in node.device):
                    crossing.append(_output_dtype(producer))
    assert sorted(crossing) == ["bfloat16", "bfloat16", "int64"]


def _output_dtype(node):
    for key in ("DstT", "T", "dtype"):
        if key in node.attr:
            return tf.as_dtype(node.attr[key].type).name
    raise AssertionError(f"no dtype attribute on {node.name}")


def test_an_exchange_built_after_the_init_op_is_refused(world, cluster, container):
    with tf.Graph().as_default():
        getter = ElasticAverageCustomGetter("/job:worker/task:0")
        with worker_scope(cluster.spec, 0, getter, container):
            a = tf.compat.v1.get_variable("a", [3])
            b = tf.compat.v1.get_variable("b", [3])
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), 1, getter, rho=0.0,
                wire_dtype=tf.bfloat16,
            )  # fmt: skip
            opt.minimize(tf.reduce_sum(a), var_list=[a])
            opt.get_init_op(0)
            with pytest.raises(RuntimeError, match="after get_init_op.*16-bit wire"):
                opt.minimize(tf.reduce_sum(b), var_list=[b])
