"""The work ledger's variables (tf_contrib_easgd/job/ledger_variables.py) on in-process servers.

Two workers build the same ledger in their own graphs; what one writes on ps 0 the other
reads, and a checkpoint holds it. The protocol on them (`WorkLedger`) is tested in a user's
loop in tests/cluster/test_work_ledger_cluster.py, and end to end (restarts resume from the
counts) in tests/e2e/test_faults.py.
"""

import pytest

from tf_contrib_easgd.job import ledger


@pytest.mark.parametrize(
    ("workers", "secs"),
    # 50 polls/s at most on ps 0 together: up to 10 workers each polls every 0.2 s (10 x 5
    # = 50 polls/s); 64 workers every 64 / 50 = 1.28 s (64 / 1.28 = 50); 256 every 5.12 s.
    [(1, 0.2), (10, 0.2), (11, 0.22), (64, 1.28), (256, 5.12)],
)
def test_finished_workers_poll_less_often_in_a_larger_job(workers, secs):
    assert ledger.waiting_poll_secs(workers) == pytest.approx(secs)
