"""The team's own copy of contrib's EASGD module, as some 2018 projects kept one.

Projects of that time often vendored `elastic_average_optimizer.py` beside their trainer
(to pin a version or patch it) and imported the optimizer from there. This stand-in keeps
that shape without holding contrib's code: on TF 1.x it re-exports contrib's names.
easgd-migrate rewrites the trainer's import of it to `tf_contrib_easgd` and reports it.
"""

from tensorflow.contrib.opt.python.training.elastic_average_optimizer import *  # noqa: F403
