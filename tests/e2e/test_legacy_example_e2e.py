"""End-to-end tests (ps and worker OS processes): examples/legacy_tf1, a 2018 TF1 EASGD
trainer run on TF 2.

The tests of its other tiers are in tests/tools/test_legacy_example.py.
"""

import re
import shutil
import time

import legacy_jobs
import pytest

EXAMPLE = legacy_jobs.LEGACY_DIR / "trainer.py"


# Local steps per worker in the end-to-end run (the example's default is 1000). A numpy run
# of the same MLP with plain single-worker SGD (lr 0.5, batch 32) reaches 0.90-0.92 test
# accuracy after 600 steps on this split, over 4 seeds; chance is 0.10, and a centre that
# never took part in an exchange stays near chance. The EASGD pull towards the centre and a
# worker that may start after the chief has finished cost a few points, so 0.80 tells a
# working migration from a broken one with room to spare. One run here gave 0.886 for both
# workers and 0.879 for the centre.
TRAIN_STEPS = 600


TARGET_ACCURACY = 0.80


# Deadlines: importing TensorFlow takes 10-15 s per process on a 2-core machine, three at once
# take longer, and the 600 steps take 10-20 s.
CHIEF_READY_TIMEOUT_S = 150


TRAINING_TIMEOUT_S = 240


@pytest.mark.timeout(CHIEF_READY_TIMEOUT_S + TRAINING_TIMEOUT_S + 2 * legacy_jobs.TOOL_TIMEOUT_S)
def test_migrated_example_trains_on_a_ps_and_two_workers(tmp_path, legacy_processes):
    start = time.monotonic()
    script = tmp_path / "trainer.py"
    shutil.copy(EXAMPLE, script)
    legacy_jobs.upgrade_v2(script)
    report = legacy_jobs.migrate([script.name], tmp_path)
    assert "1 changed, 0 use(s) not converted" in report
    assert not (tmp_path / "trainer.py.bak").exists()
    print(f"converted after {time.monotonic() - start:.0f} s")

    flags = [f"--checkpoint_dir={tmp_path / 'checkpoints'}", f"--train_steps={TRAIN_STEPS}"]
    logs = legacy_processes.run_ps_and_two_workers(
        script.name, flags, CHIEF_READY_TIMEOUT_S, TRAINING_TIMEOUT_S
    )
    print(f"workers done after {time.monotonic() - start:.0f} s")
    accuracies = {}
    for index, log in enumerate(logs):
        found = re.search(rf"^Worker {index}: test accuracy ([0-9.]+) after (\d+) steps", log, re.M)
        assert found, log[-3000:]
        assert int(found.group(2)) == TRAIN_STEPS
        accuracies[f"worker{index}"] = float(found.group(1))
    accuracies["centre"] = legacy_jobs.trainer_centre(tmp_path / "checkpoints")[1]
    print(f"accuracies {accuracies}")
    assert min(accuracies.values()) >= TARGET_ACCURACY, accuracies
