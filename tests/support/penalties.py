"""Shared by the tests of the elastic penalty (tests/unit/test_penalty.py,
tests/cluster/test_penalty_cluster.py): the default-rho warning's registry, and the
momentum optimizer of their trajectories.

The fixture is bound in the test modules by assignment (`fresh_warning_registry =
penalties.fresh_warning_registry`), where it is autouse.
"""

import pytest
import tensorflow as tf

from tf_contrib_easgd import penalty


@pytest.fixture(autouse=True)
def fresh_warning_registry(monkeypatch):
    """Each test sees the warning as a fresh process would (it is shown once per process)."""
    monkeypatch.setattr(penalty, "_warned", set())


def momentum():
    """The momentum optimizer of the trajectories worked out by hand: lr 0.5, momentum 0.5."""
    return tf.compat.v1.train.MomentumOptimizer(0.5, 0.5)
