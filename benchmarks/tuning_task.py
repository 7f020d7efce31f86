"""A worker process of the tuning grid (`tuning.py`): task.py's worker, with a training loop
that logs every worker's steps.

    python -m benchmarks.tuning_task --role=worker --index=1 --cluster=... --world=tf1

It speaks task.py's protocol (`cluster.BenchCluster(..., module="benchmarks.tuning_task")`)
and builds what task.py builds for the time-to-accuracy section (`accuracy.build`: the
digits MLP, its inputs, the test-accuracy op of the shared model). Its configurations are
graphs.py's, `easgd-TAU-alphaA-rhoR` among them: TAU the communication period, A the moving
rate or `default` (the library's 0.9 / TAU / workers) and R the rho or `default`
(moving_rate / learning_rate, the elastic pull of contrib).
"""

import time

import tensorflow as tf
from absl import app

from benchmarks import task


class TuningWorker(task.Worker):
    """task.py's worker with the tuning configurations and `train_logged`."""

    def train_logged(self, start_at, seconds, log_every):
        """Trains from wall time `start_at` for `seconds`, logging every `log_every` steps.

        Every worker logs (seconds since start, its local steps) at step 0 and every
        `log_every` local steps; worker 0 adds the test accuracy of the shared model, which
        it evaluates there in its training thread (so every configuration pays the same
        evaluation cost per local step).

        Returns:
            {"steps": local steps taken, "log": [[secs, steps] or [secs, steps, accuracy]]}.
        """
        accuracy = self.accuracy if self.index == 0 else None
        while time.time() < start_at:
            time.sleep(min(0.01, max(start_at - time.time(), 0)))
        end = start_at + seconds
        steps, log = 0, []
        while True:
            now = time.time()
            if steps % log_every == 0:
                point = [now - start_at, steps]
                if accuracy is not None:
                    point.append(float(self.session.run(accuracy)))
                log.append(point)
            if now >= end:
                break
            self.session.run(self.built.train_op)
            steps += 1
        return {"steps": steps, "log": log}

    def finish(self):
        """Worker 0, once every worker has stopped: the final accuracy, global_step, and
        EASGD's moving rate and rho as the optimizer holds them (its defaults computed).

        global_step counts EASGD's exchanges (of all workers) and async SGD's updates; it,
        the moving rate and rho are None where the configuration has none.
        """
        answer = {
            "accuracy": float(self.session.run(self.accuracy)),
            "global_step": None,
            "moving_rate": None,
            "rho": None,
        }
        global_step = tf.compat.v1.train.get_global_step(self.built.graph)
        if global_step is not None:
            answer["global_step"] = int(self.session.run(global_step))
        optimizer = self.built.easgd_optimizer
        if optimizer is not None:
            answer["moving_rate"] = float(optimizer.moving_rate)
            answer["rho"] = float(optimizer._rho)  # Contrib's attribute: the default computed.
        return answer


def main(argv):
    """task.py's main, with `TuningWorker` for the workers."""
    del argv  # Unused.
    task.serve(TuningWorker)


if __name__ == "__main__":
    app.run(main)
