"""Stacks of a silent worker, for the report of a hang: py-spy, when it is installed.

A worker whose steps hang says so itself (`trainer.stall`), but only if its watch thread
runs. To see where a hang is, `StackSampler` has `py-spy dump` write the Python stacks of
every thread of a worker that has reported nothing for `after_secs`, again every
`every_secs` while it stays silent, into `out_dir/<time>-<task>.txt`. py-spy reads the
process from outside (ptrace) and stops nothing; without it the sampler does nothing.
"""

import os
import shutil
import subprocess
import time


class StackSampler:
    """Dumps the stacks of silent workers with py-spy, if there is one.

    Args:
        out_dir: where the dumps go.
        py_spy: the py-spy executable; None: `py-spy` on PATH, if any; "": never dump.
        after_secs: a worker silent this long is dumped...
        every_secs: ...and again every this many seconds while it stays silent.
    """

    def __init__(self, out_dir, py_spy=None, after_secs=8.0, every_secs=10.0):
        self.py_spy = shutil.which("py-spy") if py_spy is None else py_spy
        self.out_dir = out_dir
        self.after_secs = after_secs
        self.every_secs = every_secs
        self.dumps = []  # The files written, in order.
        self._last = {}  # Task name -> `time.time()` of its last dump.
        self._running = []

    def sample(self, silence, pids):
        """Dumps each worker silent for long enough, unless it was dumped lately.

        Args:
            silence: `{task name: seconds silent}` (`measure.silence`).
            pids: `{task name: pid}` of the running tasks.
        """
        if not self.py_spy:
            return
        now = time.time()
        for name, secs in silence.items():
            pid = pids.get(name)
            due = now - self._last.get(name, 0.0) >= self.every_secs
            if pid is None or secs < self.after_secs or not due:
                continue
            self._last[name] = now
            os.makedirs(self.out_dir, exist_ok=True)
            path = os.path.join(self.out_dir, f"{now:.1f}-{name.replace(' ', '')}.txt")
            with open(path, "w", encoding="utf-8") as out:
                out.write(f"{name}, silent for {secs:.1f} s\n")
                out.flush()
                self._running.append(
                    subprocess.Popen(
                        [self.py_spy, "dump", "--pid", str(pid)],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
            self.dumps.append(path)
        self._running = [process for process in self._running if process.poll() is None]

    def close(self):
        """Waits briefly for the dumps under way, then ends those still running."""
        for process in self._running:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self._running = []
