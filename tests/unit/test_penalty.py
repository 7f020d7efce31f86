"""The elastic penalty's two forms (`penalty="gradient"`/`"move"`) and the default-rho warning.

One worker whose devices are all local, so the numbers are exact (one test runs the same
on a worker of the in-process cluster, its centres on the ps). Every trajectory below is
worked out by hand in its comments; rows are (w, local centre, global centre) after each
local step, the exchange (when due) included. The exchange, as in test_optimizer.py: the
local centre takes the global centre's value c, d = alpha * (w - c), w -= d, c += d.
"""

import re
import warnings

import numpy as np
import penalties
import pytest
import tensorflow as tf
from penalties import momentum as _momentum

from tf_contrib_easgd import (
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
    ElasticPenaltyWarning,
)

# The autouse fixture of penalties (shared with tests/cluster/test_penalty_cluster.py): each
# test sees the default-rho warning as a fresh process would.
fresh_warning_registry = penalties.fresh_warning_registry


def _initialize(session):
    session.run(
        [tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()]
    )


def _trajectory(make_opt, loss_of, steps, period, form, rho=None, slot=None, w0=8.0):
    """Trains scalar w from `w0` for `steps` local steps at moving rate 0.25.

    Returns:
        The rows (w, local centre, global centre) after each step, and the values of the
        wrapped optimizer's slot `slot` (None: no slot) after each step.
    """
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(w0))
        with warnings.catch_warnings():
            # The default rho's warning with Momentum and Adam is tested below.
            warnings.simplefilter("ignore", ElasticPenaltyWarning)
            opt = ElasticAverageOptimizer(
                make_opt(),
                1,
                getter,
                communication_period=period,
                moving_rate=0.25,
                rho=rho,
                penalty=form,
            )
        train_op = opt.minimize(loss_of(w))
        entry = getter.find(w)
        fetch = [v.read_value() for v in (w, entry.local_center, entry.global_center)]
        slot_value = opt.get_slot(w, slot).read_value() if slot else tf.constant(0.0)
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run(opt.get_init_op(0))
            rows, slots = [], []
            for _ in range(steps):
                session.run(train_op)
                rows.append(tuple(float(v) for v in session.run(fetch)))
                slots.append(float(session.run(slot_value)))
    return rows, slots


def _half_square(w):
    return 0.5 * tf.square(w)  # Gradient w.


def _sgd():
    return tf.compat.v1.train.GradientDescentOptimizer(0.5)


_SGD_RATES = {
    "float": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.5),
    "tensor": lambda: tf.compat.v1.train.GradientDescentOptimizer(tf.constant(0.5)),
    "callable": lambda: tf.compat.v1.train.GradientDescentOptimizer(lambda: 0.5),
}


@pytest.mark.parametrize(
    ("period", "expected"),
    [
        # SGD lr 0.5 on 0.5 * w^2 (gradient w), alpha 0.25, eta * rho = 0.25. A step is
        # w <- w - 0.5 * w - 0.25 * (w - local centre), both terms at the w before it.
        # 1: 8 - 4 - 0.25 * (8 - 8) = 4.
        # 2: 4 - 2 - 0.25 * (4 - 8) = 3; exchange: centre 8, w - c = -5, w = 3 + 1.25 = 4.25,
        #    centre 8 - 1.25 = 6.75, the local centre keeps 8 (the value read).
        # 3: 4.25 - 2.125 - 0.25 * (4.25 - 8) = 2.125 + 0.9375 = 3.0625.
        # 4: 3.0625 - 1.53125 - 0.25 * (3.0625 - 8) = 1.53125 + 1.234375 = 2.765625;
        #    exchange: local centre 6.75, w - c = -3.984375, d = -0.99609375,
        #    w = 3.76171875, centre = 5.75390625.
        (
            2,
            [
                (4.0, 8.0, 8.0),
                (4.25, 8.0, 6.75),
                (3.0625, 8.0, 6.75),
                (3.76171875, 6.75, 5.75390625),
            ],
        ),
        # Period 1: 1: 8 - 4 - 0 = 4; exchange: w - c = -4, w = 5, centre 7, local centre 8.
        # 2: 5 - 2.5 - 0.25 * (5 - 8) = 3.25; exchange: local centre 7, w - c = -3.75,
        #    w = 3.25 + 0.9375 = 4.1875, centre 7 - 0.9375 = 6.0625.
        # 3: 4.1875 - 2.09375 - 0.25 * (4.1875 - 7) = 2.09375 + 0.703125 = 2.796875;
        #    exchange: local centre 6.0625, w - c = -3.265625, d = -0.81640625,
        #    w = 3.61328125, centre 5.24609375.
        (1, [(5.0, 8.0, 7.0), (4.1875, 7.0, 6.0625), (3.61328125, 6.0625, 5.24609375)]),
    ],
)
@pytest.mark.parametrize("form", ["gradient", "move"])
@pytest.mark.parametrize("rho", [None, 0.5])
def test_sgd_trajectory_is_the_same_in_both_forms(world, period, expected, form, rho):
    # With SGD the gradient form's step w - 0.5 * (w + rho * (w - c)) is the move form's
    # w - 0.5 * w - 0.5 * rho * (w - c): rho = 0.5 (explicit, or the default
    # moving_rate / lr = 0.25 / 0.5) gives eta * rho = 0.25, exact in binary here.
    rows, _ = _trajectory(_sgd, _half_square, len(expected), period, form, rho=rho)
    assert rows == expected


@pytest.mark.parametrize("rate", sorted(_SGD_RATES))
def test_move_uses_the_learning_rate_with_an_explicit_rho(world, rate):
    # Explicit rho 0.5 with lr 0.5 as a float, a tensor or a callable: eta * rho = 0.25, the
    # period-1 trajectory of the test above.
    rows, _ = _trajectory(_SGD_RATES[rate], _half_square, 3, 1, "move", rho=0.5)
    assert rows == [(5.0, 8.0, 7.0), (4.1875, 7.0, 6.0625), (3.61328125, 6.0625, 5.24609375)]


@pytest.mark.parametrize(
    ("form", "period", "expected", "accumulators"),
    [
        # Momentum lr 0.5, m 0.5 (accum <- 0.5 * accum + g; w <- w - 0.5 * accum) on
        # 0.5 * w^2, alpha 0.25. The move is -0.25 * (w - local centre) at the w before the
        # step, outside the accumulator, which holds the loss's gradients only.
        # 1: g 8, accum 8, w = 8 - 4 = 4, move 0.
        # 2: g 4, accum 4 + 4 = 8, w = 4 - 4 = 0, move -0.25 * (4 - 8) = +1: w = 1;
        #    exchange: w - c = 1 - 8 = -7, w = 1 + 1.75 = 2.75, centre 8 - 1.75 = 6.25.
        # 3: g 2.75, accum 4 + 2.75 = 6.75, w = 2.75 - 3.375 = -0.625,
        #    move -0.25 * (2.75 - 8) = +1.3125: w = 0.6875.
        # 4: g 0.6875, accum 3.375 + 0.6875 = 4.0625, w = 0.6875 - 2.03125 = -1.34375,
        #    move -0.25 * (0.6875 - 8) = +1.828125: w = 0.484375; exchange: local centre
        #    6.25, w - c = -5.765625, d = -1.44140625, w = 1.92578125, centre 4.80859375.
        (
            "move",
            2,
            [
                (4.0, 8.0, 8.0),
                (2.75, 8.0, 6.25),
                (0.6875, 8.0, 6.25),
                (1.92578125, 6.25, 4.80859375),
            ],
            [8.0, 8.0, 6.75, 4.0625],
        ),
        # The gradient form (contrib's), rho = 0.25 / 0.5 = 0.5: g = w + 0.5 * (w - c) goes
        # into the accumulator, which carries the pull on to later steps.
        # 1: g 8 + 0 = 8, accum 8, w = 4.
        # 2: g 4 + 0.5 * (4 - 8) = 2, accum 4 + 2 = 6, w = 4 - 3 = 1 (as with the move: the
        #    accumulator held no pull yet); exchange as above: w 2.75, centre 6.25.
        # 3: g 2.75 + 0.5 * (2.75 - 8) = 0.125, accum 3 + 0.125 = 3.125,
        #    w = 2.75 - 1.5625 = 1.1875 (the move form: 0.6875).
        # 4: g 1.1875 + 0.5 * (1.1875 - 8) = -2.21875, accum 1.5625 - 2.21875 = -0.65625,
        #    w = 1.1875 + 0.328125 = 1.515625; exchange: local centre 6.25, w - c = -4.734375,
        #    d = -1.18359375, w = 2.69921875, centre 5.06640625.
        (
            "gradient",
            2,
            [
                (4.0, 8.0, 8.0),
                (2.75, 8.0, 6.25),
                (1.1875, 8.0, 6.25),
                (2.69921875, 6.25, 5.06640625),
            ],
            [8.0, 6.0, 3.125, -0.65625],
        ),
        # Period 1, the move form.
        # 1: accum 8, w = 4, move 0; exchange: w - c = -4, w = 5, centre 7, local centre 8.
        # 2: g 5, accum 4 + 5 = 9, w = 5 - 4.5 = 0.5, move -0.25 * (5 - 8) = +0.75: w = 1.25;
        #    exchange: local centre 7, w - c = -5.75, w = 1.25 + 1.4375 = 2.6875, centre 5.5625.
        # 3: g 2.6875, accum 4.5 + 2.6875 = 7.1875, w = 2.6875 - 3.59375 = -0.90625,
        #    move -0.25 * (2.6875 - 7) = +1.078125: w = 0.171875; exchange: local centre
        #    5.5625, w - c = -5.390625, d = -1.34765625, w = 1.51953125,
        #    centre 4.21484375.
        (
            "move",
            1,
            [(5.0, 8.0, 7.0), (2.6875, 7.0, 5.5625), (1.51953125, 5.5625, 4.21484375)],
            [8.0, 9.0, 7.1875],
        ),
    ],
)
def test_momentum_trajectory(world, form, period, expected, accumulators):
    rows, slots = _trajectory(_momentum, _half_square, len(expected), period, form, slot="momentum")
    assert rows == expected
    assert slots == accumulators


def _adam():
    return tf.compat.v1.train.AdamOptimizer(0.25)


def _linear(w):
    return 2.0 * w  # Gradient 2, constant.


@pytest.mark.parametrize(
    ("period", "expected"),
    [
        # Adam lr 0.25 (beta1 0.9, beta2 0.999, epsilon 1e-8) on the loss 2 * w: with a
        # constant gradient g, m_t = (1 - 0.9^t) g and v_t = (1 - 0.999^t) g^2, so its step
        # lr * sqrt(1 - 0.999^t) / (1 - 0.9^t) * m_t / (sqrt(v_t) + eps) is 0.25 up to
        # epsilon (a relative 2e-7 at t = 1, hence approx). The move, alpha 0.25, is
        # -0.25 * (w - local centre) at the w before the step, outside m and v.
        # 1: 8 - 0.25 = 7.75, move 0.
        # 2: 7.75 - 0.25 = 7.5, move -0.25 * (7.75 - 8) = +0.0625: 7.5625; exchange:
        #    w - c = -0.4375, d = -0.109375, w = 7.671875, centre 7.890625.
        # 3: 7.671875 - 0.25 = 7.421875, move -0.25 * (7.671875 - 8) = +0.08203125:
        #    7.50390625.
        # 4: 7.50390625 - 0.25 = 7.25390625, move -0.25 * (7.50390625 - 8) = +0.1240234375:
        #    7.3779296875; exchange: local centre 7.890625, w - c = -0.5126953125,
        #    d = -0.128173828125, w = 7.506103515625, centre 7.762451171875.
        (
            2,
            [
                (7.75, 8.0, 8.0),
                (7.671875, 8.0, 7.890625),
                (7.50390625, 8.0, 7.890625),
                (7.506103515625, 7.890625, 7.762451171875),
            ],
        ),
        # Period 1. 1: 7.75; exchange: w - c = -0.25, w = 7.8125, centre 7.9375, local centre 8.
        # 2: 7.8125 - 0.25 = 7.5625, move -0.25 * (7.8125 - 8) = +0.046875: 7.609375;
        #    exchange: local centre 7.9375, w - c = -0.328125, d = -0.08203125,
        #    w = 7.69140625, centre 7.85546875.
        # 3: 7.69140625 - 0.25 = 7.44140625, move -0.25 * (7.69140625 - 7.9375) =
        #    +0.0615234375: 7.5029296875; exchange: local centre 7.85546875,
        #    w - c = -0.3525390625, d = -0.088134765625, w = 7.591064453125,
        #    centre 7.767333984375.
        (
            1,
            [
                (7.8125, 8.0, 7.9375),
                (7.69140625, 7.9375, 7.85546875),
                (7.591064453125, 7.85546875, 7.767333984375),
            ],
        ),
    ],
)
def test_adam_trajectory_with_the_move(world, period, expected):
    rows, first_moments = _trajectory(_adam, _linear, len(expected), period, "move", slot="m")
    assert rows == [pytest.approx(row, rel=1e-6) for row in expected]
    # m_t = (1 - 0.9^t) * 2 holds the loss's gradient alone: 0.2, 0.38, 0.542, 0.6878.
    assert first_moments == pytest.approx([0.2, 0.38, 0.542, 0.6878][: len(expected)], rel=1e-6)


def test_adam_gradient_form_feeds_the_pull_into_its_moments(world):
    # The gradient form at step 2 (period 2, rho = 0.25 / 0.25 = 1): step 1 as above
    # (w 7.75, m 0.2); the gradient is 2 + 1 * (7.75 - 8) = 1.75, so m = 0.18 + 0.175 =
    # 0.355 instead of the move form's 0.38.
    _, first_moments = _trajectory(_adam, _linear, 2, 2, "gradient", slot="m")
    assert first_moments == pytest.approx([0.2, 0.355], rel=1e-6)


_W0 = np.array([1.0, -2.0, 0.5, 3.0, -1.5], dtype=np.float32)


@pytest.mark.parametrize("period", [1, 3])
def test_sgd_forms_agree_up_to_rounding_on_a_larger_problem(world, period):
    # Least squares 0.5 * ||A w - b||^2 on 5 parameters (and a bias), lr 0.05, alpha 0.3,
    # default rho = 0.3 / 0.05 = 6: the forms differ only in how the float operations
    # round, never by more than a few float32 ulps per step.
    rng = np.random.default_rng(7)
    a = rng.normal(size=(8, 5)).astype(np.float32)
    b = rng.normal(size=8).astype(np.float32)
    results = {}
    for form in ("gradient", "move"):
        getter = ElasticAverageCustomGetter("")
        with tf.Graph().as_default():
            with tf.compat.v1.variable_scope("", custom_getter=getter):
                w = tf.compat.v1.get_variable("w", initializer=tf.constant(_W0))
                bias = tf.compat.v1.get_variable("bias", initializer=tf.constant(0.5))
            loss = 0.5 * tf.reduce_sum(tf.square(tf.linalg.matvec(a, w) + bias - b))
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.05),
                1,
                getter,
                communication_period=period,
                moving_rate=0.3,
                penalty=form,
            )
            train_op = opt.minimize(loss)
            tracked = [w, bias, getter.find(w).global_center, getter.find(bias).global_center]
            fetch = [v.read_value() for v in tracked]
            with tf.compat.v1.Session() as session:
                _initialize(session)
                session.run(opt.get_init_op(0))
                history = []
                for _ in range(12):
                    session.run(train_op)
                    history.append(np.concatenate([np.ravel(v) for v in session.run(fetch)]))
        results[form] = np.array(history)
    np.testing.assert_allclose(results["move"], results["gradient"], rtol=1e-5, atol=1e-6)
    # And they did train: the centre moved away from the start (w, bias).
    assert np.abs(results["move"][-1][6:] - np.append(_W0, 0.5)).max() > 0.1


def _ancestors(op):
    """Every op `op` depends on, through data and control edges."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen


@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam"])
def test_move_reads_before_and_writes_after_the_update(world, kind):
    # Race-free ordering, whatever the variable kind: every op of the wrapped optimizer
    # that writes the worker copy waits for every elastic delta (so x_t is read before the
    # update), and every elastic subtraction waits for those writes.
    make = {
        "sgd": _sgd,
        "momentum": _momentum,
        "adam": _adam,
    }[kind]
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default() as graph:
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", [3])
            v = tf.compat.v1.get_variable("v", [2])
        opt = ElasticAverageOptimizer(make(), 1, getter, penalty="move")
        opt.minimize(tf.reduce_sum(tf.square(w)) + tf.reduce_sum(v))
        ops = graph.get_operations()
        updates = [op for op in ops if op.type.startswith(("Apply", "ResourceApply"))]
        subtractions = [op for op in ops if op.type in ("AssignSub", "AssignSubVariableOp")]
        subtractions = [op for op in subtractions if op.name.startswith("elastic_move")]
        deltas = [op for op in ops if op.name.startswith("elastic_move/mul")]
    assert len(updates) == 2
    assert len(deltas) == 2
    assert len(subtractions) == 2
    for update in updates:
        assert set(deltas) <= _ancestors(update)
    for subtraction in subtractions:
        assert set(updates) <= _ancestors(subtraction)


def test_default_graph_is_unchanged_by_the_argument(world):
    # penalty="gradient" spelled out builds exactly the graph of the default, and neither
    # has an op of the move form.
    graphs = []
    for kwargs in ({}, {"penalty": "gradient"}):
        getter = ElasticAverageCustomGetter("")
        with tf.Graph().as_default() as graph:
            with tf.compat.v1.variable_scope("", custom_getter=getter):
                w = tf.compat.v1.get_variable("w", [3])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ElasticPenaltyWarning)
                opt = ElasticAverageOptimizer(
                    tf.compat.v1.train.MomentumOptimizer(0.1, 0.9), 1, getter, **kwargs
                )
            opt.minimize(tf.reduce_sum(tf.square(w)))
        assert not [op for op in graph.get_operations() if "elastic_move" in op.name]
        assert [op for op in graph.get_operations() if "elastic_penalty" in op.name]
        graphs.append(graph.as_graph_def())
    # The exchange functions carry a random suffix; compare the ops of the graph itself.
    first, second = ([(n.name, n.op, list(n.input)) for n in g.node] for g in graphs)
    assert first == second


def test_rho_zero_makes_no_move(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default() as graph:
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", [3])
        opt = ElasticAverageOptimizer(_momentum(), 1, getter, rho=0.0, penalty="move")
        opt.minimize(tf.reduce_sum(tf.square(w)))
    assert not [op for op in graph.get_operations() if "elastic_" in op.name]


class _CustomOptimizer(tf.compat.v1.train.Optimizer):
    """A v1 optimizer this library does not know, with a learning rate it can read."""

    def __init__(self):
        super().__init__(False, "Custom")
        self._learning_rate = 0.1


_WARNED = {
    "momentum": (
        lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
        r"goes through MomentumOptimizer.*with momentum 0\.9, to about 1 / \(1 - 0\.9\) = "
        r"10x moving_rate per step",
    ),
    "momentum 0.99": (
        lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.99),
        r"1 / \(1 - 0\.99\) = 100x moving_rate",
    ),
    "nesterov": (
        lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
        r"with Nesterov momentum 0\.9, to about 1 / \(1 - 0\.9\) = 10x",
    ),
    "momentum tensor": (
        lambda: tf.compat.v1.train.MomentumOptimizer(0.1, tf.constant(0.9)),
        r"with momentum m, to about 1 / \(1 - m\) times moving_rate",
    ),
    "adam": (
        lambda: tf.compat.v1.train.AdamOptimizer(0.001),
        r"AdamOptimizer divides it per coordinate by the root of a running mean",
    ),
    "adagrad": (
        lambda: tf.compat.v1.train.AdagradOptimizer(0.1),
        r"AdagradOptimizer divides it .* accumulated squared gradients",
    ),
    "proximal adagrad": (
        lambda: tf.compat.v1.train.ProximalAdagradOptimizer(0.1),
        r"ProximalAdagradOptimizer divides it",
    ),
    "adagrad DA": (
        lambda: tf.compat.v1.train.AdagradDAOptimizer(
            0.1, tf.compat.v1.train.get_or_create_global_step()
        ),
        r"AdagradDAOptimizer averages it with every past gradient",
    ),
    "adadelta": (
        lambda: tf.compat.v1.train.AdadeltaOptimizer(0.1),
        r"AdadeltaOptimizer rescales it",
    ),
    "rmsprop": (
        lambda: tf.compat.v1.train.RMSPropOptimizer(0.1),
        r"RMSPropOptimizer divides it per coordinate[^(]*, which makes it many times",
    ),
    "rmsprop momentum": (
        lambda: tf.compat.v1.train.RMSPropOptimizer(0.1, momentum=0.5),
        r"RMSPropOptimizer divides .* \(and its momentum 0\.5 accumulates it\)",
    ),
    "ftrl": (lambda: tf.compat.v1.train.FtrlOptimizer(0.1), r"FtrlOptimizer rescales it"),
    "unknown": (
        _CustomOptimizer,
        r"only if _CustomOptimizer steps by exactly learning_rate \* gradient, which this "
        r"library cannot tell",
    ),
}


@pytest.mark.parametrize("kind", sorted(_WARNED))
def test_default_rho_warns_with_the_pull_and_the_advice(world, kind):
    make, pull = _WARNED[kind]
    with tf.Graph().as_default():
        opt_to_wrap = make()
        with pytest.warns(ElasticPenaltyWarning) as record:
            ElasticAverageOptimizer(opt_to_wrap, 1, ElasticAverageCustomGetter(""))
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith("ElasticAverageOptimizer: with rho=None (contrib's default")
    assert re.search(pull, message), message
    assert "Use rho=0.0" in message
    assert "penalty='move'" in message
    assert "pass rho explicitly" in message
    assert record[0].filename == __file__  # It names the caller's line.


@pytest.mark.parametrize(
    ("make", "kwargs"),
    [
        (lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1), {}),
        (lambda: tf.compat.v1.train.ProximalGradientDescentOptimizer(0.1), {}),
        (lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.0), {}),
        (lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9), {"rho": 0.0}),
        (lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9), {"rho": 0.5}),
        (lambda: tf.compat.v1.train.AdamOptimizer(0.1), {"rho": 0.5}),
        (lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9), {"penalty": "move"}),
        (lambda: tf.compat.v1.train.AdamOptimizer(0.1), {"penalty": "move", "rho": 2.0}),
    ],
    ids=[
        "sgd",
        "proximal sgd",
        "momentum 0",
        "momentum rho 0",
        "momentum explicit rho",
        "adam explicit rho",
        "momentum move",
        "adam move explicit rho",
    ],
)
def test_no_warning_for_plain_sgd_an_explicit_rho_or_the_move(world, make, kwargs):
    with tf.Graph().as_default():
        opt_to_wrap = make()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ElasticPenaltyWarning)
            ElasticAverageOptimizer(opt_to_wrap, 1, ElasticAverageCustomGetter(""), **kwargs)


def test_warning_comes_once_per_process_and_message(world):
    with tf.Graph().as_default(), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for momentum in (0.9, 0.9, 0.99, 0.9, 0.99):
            ElasticAverageOptimizer(
                tf.compat.v1.train.MomentumOptimizer(0.1, momentum),
                1,
                ElasticAverageCustomGetter(""),
            )
    messages = [str(r.message) for r in record if r.category is ElasticPenaltyWarning]
    assert len(messages) == 2
    assert "0.9, to about" in messages[0]
    assert "0.99, to about" in messages[1]


def test_the_warning_is_a_user_warning():
    assert issubclass(ElasticPenaltyWarning, UserWarning)


@pytest.mark.parametrize(
    ("value", "error", "pattern"),
    [
        ("moves", ValueError, r"penalty must be 'gradient' .* or 'move' .*, got 'moves'"),
        ("Gradient", ValueError, r"penalty must be .*got 'Gradient'"),
        (None, TypeError, r"penalty must be 'gradient' or 'move', got None of type NoneType"),
        (1, TypeError, r"penalty must be 'gradient' or 'move', got 1 of type int"),
    ],
)
def test_bad_penalty_is_refused_before_anything_is_built(world, value, error, pattern):
    with tf.Graph().as_default() as graph:
        getter = ElasticAverageCustomGetter("")
        opt_to_wrap = _sgd()
        built = len(graph.get_operations())
        with pytest.raises(error, match=pattern):
            ElasticAverageOptimizer(opt_to_wrap, 1, getter, penalty=value)
        assert len(graph.get_operations()) == built


def test_penalty_is_keyword_only(world):
    # Contrib's positional signature ends with `name`; one more positional is refused.
    with tf.Graph().as_default(), pytest.raises(TypeError, match="positional"):
        ElasticAverageOptimizer(
            _sgd(), 1, ElasticAverageCustomGetter(""), 10, None, None, True, False, "n", "move"
        )


class _NoRateOptimizer(tf.compat.v1.train.Optimizer):
    """A v1 optimizer that keeps no learning rate."""

    def __init__(self):
        super().__init__(False, "NoRate")


def test_move_needs_the_learning_rate_only_for_an_explicit_rho(world):
    with tf.Graph().as_default():
        getter = ElasticAverageCustomGetter("")
        # The default rho's move is moving_rate itself: no learning rate is read.
        ElasticAverageOptimizer(_NoRateOptimizer(), 1, getter, penalty="move")
        ElasticAverageOptimizer(_NoRateOptimizer(), 1, getter, rho=0.0, penalty="move")
        with pytest.raises(
            ValueError,
            match=r"penalty='move' moves by learning_rate \* rho, but _NoRateOptimizer has no "
            r"learning rate .* Pass rho=None",
        ):
            ElasticAverageOptimizer(_NoRateOptimizer(), 1, getter, rho=0.5, penalty="move")
        with pytest.raises(ValueError, match=r"learning rate of opt is 0\.0; pass rho=None"):
            ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.0),
                1,
                getter,
                rho=0.5,
                penalty="move",
            )
