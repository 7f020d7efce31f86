"""In-process cluster tests: ElasticAverageWorker, EASGD in a TF 2 custom training loop.

The tests of its other tiers are in tests/unit/test_eager_worker.py.
"""

import numpy as np
import pytest
import tensorflow as tf
from clusters import cluster_and_worker_tasks

from tf_contrib_easgd import ElasticAverageWorker
from tf_contrib_easgd.eager.centre_link import CentreLink

DEADLINE_SECS = 30  # Of every wait in a test that ends by itself.


class Linear(tf.Module):
    """p = x . kernel + bias, made at once (tf.Module lists variables by attribute name:
    bias, then kernel)."""

    def __init__(self, kernel, bias):
        super().__init__(name="linear")
        self.kernel = tf.Variable([kernel, kernel], name="kernel")
        self.bias = tf.Variable(bias, name="bias")

    def __call__(self, x):
        return tf.linalg.matvec(x, self.kernel) + self.bias


def test_one_exchange_in_a_tf_function_loop(tmp_path):
    # One worker, one ps. Input [1, 1], target 0, squared error: p = k1 + k2 + b, gradient
    # 2p for each variable; plain SGD lr 0.1 in a tf.function, tau 2, alpha 0.5. The chief
    # initialises the centre from its initial k = [0.5, 0.5], b = 0.
    # step 1: p = 1.0,  grad 2.0:  k = 0.3,  b = -0.2
    # step 2: p = 0.4,  grad 0.8:  k = 0.22, b = -0.28; exchange:
    #         d_k = 0.5 * (0.22 - 0.5) = -0.14, d_b = 0.5 * (-0.28 - 0) = -0.14
    #         worker k = 0.36, b = -0.14; centre k = 0.36, b = -0.14; global_step 1
    # step 3: p = 0.58, grad 1.16: k = 0.244, b = -0.256; the centre stays.
    # end(): the worker copies the centre, k = 0.36, b = -0.14.
    cluster, (task,) = cluster_and_worker_tasks(num_ps=1, num_workers=1)
    model = Linear(0.5, 0.0)

    @tf.function
    def train_step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(model(x)))
        variables = model.trainable_variables
        for variable, gradient in zip(variables, tape.gradient(loss, variables), strict=True):
            variable.assign_sub(0.1 * gradient)

    worker = ElasticAverageWorker(
        task, model, 2, 0.5, tmp_path, server=cluster.servers["worker", 0], timeout_secs=30
    )
    rows = []
    with worker:
        assert (worker.centre_found, worker.elastic_distance()) == ("initialised", 0.0)
        for _ in range(3):
            train_step(tf.ones([1, 2]))
            worker.step()
            (centre_b, centre_k) = worker.centre_values()  # Bias first: by attribute name.
            rows.append((*model.kernel.numpy(), model.bias.numpy(), *centre_k, centre_b))
    np.testing.assert_allclose(
        rows,
        [
            (0.3, 0.3, -0.2, 0.5, 0.5, 0.0),
            (0.36, 0.36, -0.14, 0.36, 0.36, -0.14),
            (0.244, 0.244, -0.256, 0.36, 0.36, -0.14),
        ],
        rtol=1e-6,
        atol=1e-7,
    )
    assert (worker.local_steps, worker.exchanges, worker.global_step) == (3, 1, 1)
    np.testing.assert_allclose([*model.kernel.numpy(), model.bias.numpy()], [0.36, 0.36, -0.14])
    # The chief's end() stopped the parameter servers: nothing more reaches them.
    for call in ("save_checkpoint", "step"):
        with pytest.raises(RuntimeError, match=rf"{call}\(\) while its link to the centre is"):
            getattr(worker, call)()
    # The chief wrote the centre where plain TF 2 reads it, into a module of the same shape.
    plain = Linear(0.0, 0.0)
    tf.train.Checkpoint(model=plain).read(str(tmp_path / "centre")).assert_consumed()
    np.testing.assert_allclose([*plain.kernel.numpy(), plain.bias.numpy()], [0.36, 0.36, -0.14])
    # And a TF1 checkpoint of the centre, for a restarted parameter server.
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == 1
    np.testing.assert_allclose(
        reader.get_tensor("global_center_variable/weight_1_kernel"), [0.36, 0.36]
    )


class _BarrierLink(CentreLink):
    """A link whose parameter servers each wait, before computing their first centre's d,
    until every other one has begun its part of the same exchange: ps i puts a token (made
    from the values it was sent) into the queue of every other ps, then takes P - 1 from its
    own. Calls made one after the other would leave the first waiting for tokens that the
    later calls bring, until the operation timeout fails the exchange."""

    def _move_centre(self, spec, centre, value, moving_rate):
        task = tf.DeviceSpec.from_string(centre.device).task
        if not hasattr(self, "queues"):
            self.queues, self.waiting = {}, set()
            for index in range(self._task.num_ps):
                with tf.compat.v1.device(f"/job:ps/task:{index}"):
                    self.queues[index] = tf.queue.FIFOQueue(
                        self._task.num_ps, tf.float32, shapes=[[]], shared_name=f"barrier{index}"
                    )
        if task in self.waiting:
            return super()._move_centre(spec, centre, value, moving_rate)
        self.waiting.add(task)
        token = tf.reduce_sum(value)  # On ps `task`: it has the values.
        arrivals = []
        for index, queue in self.queues.items():
            if index != task:
                with tf.compat.v1.device(f"/job:ps/task:{index}"):
                    arrivals.append(queue.enqueue(token))
        with tf.control_dependencies(arrivals):
            others = self.queues[task].dequeue_many(self._task.num_ps - 1)
        with tf.control_dependencies([others]):
            return super()._move_centre(spec, centre, value, moving_rate)


class _BarrierWorker(ElasticAverageWorker):
    def _link_class(self):
        return _BarrierLink


@pytest.mark.parametrize("num_ps", [2, 4])
def test_an_exchange_calls_every_parameter_server_at_once(num_ps, tmp_path):
    # num_ps variables of 4 floats, one centre per ps (placed by size, then task index).
    # The centre starts at the chief's values v_i = [i, i, i, i]; the loop then sets each
    # to v_i + 2, and the exchange at tau 1, alpha 0.5 moves both by d = 0.5 * 2 = 1: the
    # worker to v_i + 1, the centre to v_i + 1. It can only complete if every ps's part
    # ran while the others' did (the barrier above).
    cluster, (task,) = cluster_and_worker_tasks(num_ps=num_ps, num_workers=1)
    variables = [tf.Variable(tf.fill([4], float(i))) for i in range(num_ps)]
    worker = _BarrierWorker(
        task, variables, 1, 0.5, tmp_path, server=cluster.servers["worker", 0], timeout_secs=30
    )
    with worker:
        assert worker._link.waiting == set(range(num_ps))  # A centre, and a barrier, per ps.
        for variable in variables:
            variable.assign_add(tf.fill([4], 2.0))
        worker.step()
        expected = [np.full(4, i + 1.0) for i in range(num_ps)]
        np.testing.assert_allclose(worker.values(), expected)
        np.testing.assert_allclose(worker.centre_values(), expected)
        assert worker.global_step == 1
    # A list's centre, as the chief wrote it: a tf.train.Checkpoint of `variables=`.
    plain = [tf.Variable(tf.zeros([4])) for _ in range(num_ps)]
    tf.train.Checkpoint(variables=plain).read(str(tmp_path / "centre")).assert_consumed()
    np.testing.assert_allclose([v.numpy() for v in plain], expected)


def test_an_exchange_in_flight_never_lands_after_close_or_a_new_start():
    # One worker, tau 1, alpha 0.5, overlap; its w = 1 is the centre at the start.
    # w = 2; step sends x = 2: d = 0.5 (2 - 1) = 0.5, centre 1.5; w keeps 2 (d in flight).
    # close() (the loop raised) waits for that exchange and drops its d.
    # start(): the chief keeps the centre, w = 1.5. w = 2.5; the step lands nothing (it
    #   landed the dropped 0.5 before: w = 2), sends 2.5: d = 0.5, centre 2; w = 2.5.
    # start() again without close() (a fit that raised and a new fit): waits for it, drops
    #   it, copies the centre: w = 2. w = 3; the step lands nothing, sends 3: d = 0.5,
    #   centre 2.5; w = 3.
    # end() lands that d: w = 2.5, and copies the centre, 2.5. One exchange landed.
    cluster, (task,) = cluster_and_worker_tasks(num_ps=1, num_workers=1)
    w = tf.Variable(1.0)
    worker = ElasticAverageWorker(
        task, [w], 1, 0.5, server=cluster.servers["worker", 0], overlap=True,
        timeout_secs=DEADLINE_SECS,
    )  # fmt: skip
    rows = []
    try:
        worker.start()
        w.assign_add(1.0)
        worker.step()
        rows.append(w.numpy())
        worker.close()
        with pytest.raises(RuntimeError, match=r"step\(\) while its link to the centre is closed"):
            worker.step()  # Not TensorFlow's error of a closed session.
        worker.start()
        rows.append(w.numpy())
        w.assign_add(1.0)
        worker.step()
        rows.append(w.numpy())
        worker.start()
        rows.append(w.numpy())
        w.assign_add(1.0)
        worker.step()
        rows.append(w.numpy())
        worker.end()
    finally:
        worker.close()
    assert rows == [2.0, 1.5, 2.5, 2.0, 3.0]
    assert (w.numpy(), worker.exchanges) == (2.5, 1)


class _StoppedAtFinishLink(CentreLink):
    """A link whose parameter servers stop as soon as this worker has reported itself done
    (a chief that was waiting for it stops them at once): every later call to them fails,
    as a real one would after `timeout_secs`."""

    stopped = False

    def finish(self, local_steps, timeout_secs):
        finished = super().finish(local_steps, timeout_secs)
        self.stopped = True
        return finished

    def _check_running(self):
        if self.stopped:
            raise tf.errors.DeadlineExceededError(None, None, "the parameter servers stopped")

    def read(self):
        self._check_running()
        return super().read()

    def start_values(self):
        self._check_running()
        return super().start_values()

    def exchange(self, values):
        self._check_running()
        return super().exchange(values)

    def global_step(self):
        self._check_running()
        return super().global_step()


class _StoppedAtFinishWorker(ElasticAverageWorker):
    def _link_class(self):
        return _StoppedAtFinishLink


def _two_workers(other_class=ElasticAverageWorker):
    """A chief and worker 1 (of `other_class`) of a new cluster, tau 1, alpha 0.5, with a
    variable each: the chief's w0 = 1 (the centre it sets up), worker 1's w1 = 5."""
    cluster, tasks = cluster_and_worker_tasks(num_ps=1, num_workers=2)
    w0, w1 = tf.Variable(1.0), tf.Variable(5.0)
    chief, other = (
        make(task, [w], 1, 0.5, server=cluster.servers["worker", task.task_index],
             timeout_secs=DEADLINE_SECS)
        for make, task, w in ((ElasticAverageWorker, tasks[0], w0), (other_class, tasks[1], w1))
    )  # fmt: skip
    return chief, other, w0, w1


def test_another_workers_end_reports_it_done_after_its_last_read():
    # Worker 1 copies the centre, 1. w1 = 3; its step: d = 0.5 (3 - 1) = 1, centre 2,
    # w1 = 2, global_step 1. Its end() copies the centre (2) and reads global_step (1)
    # before it reports itself done: after that report the chief may stop the ps at once
    # (no model_dir to write first), and a read then would wait for nothing, then fail.
    chief, other, w0, w1 = _two_workers(_StoppedAtFinishWorker)
    try:
        chief.start()
        other.start()
        w1.assign_add(2.0)
        other.step()
        assert other.end() is None
        assert (w1.numpy(), other.global_step, other._link.stopped) == (2.0, 1, True)
        finished = chief.end()
    finally:
        other.close()
        chief.close()
    assert (finished.local_steps, finished.missing) == ({1: 1}, [])
    assert (w0.numpy(), chief.global_step) == (2.0, 1)


def test_another_workers_link_is_closed_by_its_end():
    # After its end() worker 1 says it has ended instead of reading parameter servers the
    # chief may have stopped; start() links it again and copies the centre (w1: 2 -> 1).
    chief, other, _, w1 = _two_workers()
    try:
        chief.start()
        other.start()
        other.end()
        assert not other.started
        with pytest.raises(RuntimeError, match=r"has ended"):
            other.centre_values()
        w1.assign(2.0)
        other.start()
        assert (other.started, w1.numpy(), other.centre_values()) == (True, 1.0, [1.0])
        other.close()
        finished = chief.end()
    finally:
        other.close()
        chief.close()
    assert finished.local_steps == {1: 0}
