"""Tests of tf_contrib_easgd.trainer.error_messages: TensorFlow's tag parsing, in one pass.

Each case compares `parse_message` with TensorFlow's own `parse_message`, kept at import
(before any test installs ours), on the same text: the two must agree exactly. No timing
here (benchmarks/error_messages.py, at commit 6b196fe, measured both).
"""

import random
import types

import pytest
import tensorflow as tf
from absl import logging as absl_logging
from tensorflow.python.framework import error_interpolation

from tf_contrib_easgd.trainer import cli, error_messages
from tf_contrib_easgd.trainer import task as task_runner

TENSORFLOW_PARSE = error_interpolation.parse_message

HAND_MADE = [
    "",
    "no tags at all",
    "{{node a}}",
    "before {{node a}} after",
    # The message form of a failed op: the tag inside [[...]].
    "Input to reshape is a tensor with 3 values\n\t [[{{node model/Reshape}}]]",
    # Function tags leave the text; node tags stay.
    "123{{node Foo}}456{{function_node Bar}}789",
    "{{function_node f}}{{function_node g}}",
    "a {{node x/y-z.1}} b {{node ps_0/easgd_train/local_steps}} c",
    # Not tags: a missing name, a second space, a brace too many, a space first.
    "{{node }} {{node a b}} {{ node a}} {{node a}}} {{{node a}} {{nodea}}",
    "{{node a\nb}} and {{colocation_node c}}",
    "unclosed {{node a",
    "}} {{",
]
FRAGMENTS = [
    "{{node a}}",
    "{{node x/y-z.1}}",
    "{{function_node f_1}}",
    "{{",
    "}}",
    "{",
    "}",
    " ",
    "\n",
    "node",
    "function_node",
    "a",
    "b/c",
    "-",
    ":",
    "[[",
    "]]",
]


def test_the_reference_is_tensorflows_own_parser():
    assert TENSORFLOW_PARSE.__module__ == error_interpolation.__name__


@pytest.mark.parametrize("message", HAND_MADE)
def test_parse_agrees_with_tensorflow_on_hand_made_messages(message):
    assert error_messages.parse_message(message) == TENSORFLOW_PARSE(message)


def test_parse_agrees_with_tensorflow_on_random_messages():
    rng = random.Random(0)
    for _ in range(500):
        message = "".join(rng.choices(FRAGMENTS, k=rng.randint(0, 30)))
        assert error_messages.parse_message(message) == TENSORFLOW_PARSE(message), message


def test_parse_returns_tensorflows_tag_tuples():
    # "a {{node n}} b {{function_node f}} c": the function tag's text goes, the node's stays.
    text, function_tags, node_tags = error_messages.parse_message(
        "a {{node n}} b {{function_node f}} c"
    )
    assert text == "a {{node n}} b  c"
    assert [(tag.type, tag.name) for tag in function_tags] == [("function_node", "f")]
    assert [(tag.type, tag.name) for tag in node_tags] == [("node", "n")]
    assert type(node_tags[0]).__name__ == "_ParseTag"


def _failed_run_message():
    """The message of the error `Session.run` raises for a placeholder left unfed."""
    with tf.Graph().as_default():
        needs_a_feed = tf.compat.v1.placeholder(tf.float32, shape=[], name="needs_a_feed")
        doubled = tf.multiply(needs_a_feed, 2.0, name="doubled")
        with (
            tf.compat.v1.Session() as session,
            pytest.raises(tf.errors.InvalidArgumentError) as raised,
        ):
            session.run(doubled)
    return raised.value.message


def test_a_failed_run_raises_the_same_message_once_installed(monkeypatch):
    messages = []
    for parse in (TENSORFLOW_PARSE, error_messages.parse_message):
        # One call site for both: the message quotes the stack that made the graph.
        monkeypatch.setattr(error_interpolation, "parse_message", parse)
        messages.append(_failed_run_message())
    with_tensorflows, with_ours = messages
    # TensorFlow appends where the tagged node was made: this file, so both name it.
    assert "needs_a_feed" in with_ours
    assert "test_error_messages.py" in with_ours
    assert with_ours == with_tensorflows


def test_install_is_idempotent(monkeypatch):
    monkeypatch.setattr(error_interpolation, "parse_message", TENSORFLOW_PARSE)
    assert error_messages.install()
    assert error_messages.install()
    assert error_interpolation.parse_message is error_messages.parse_message


def test_install_leaves_a_tensorflow_without_the_tag_pattern_alone(monkeypatch):
    monkeypatch.setattr(error_interpolation, "parse_message", TENSORFLOW_PARSE)
    monkeypatch.setattr(error_messages, "_TAG", None)
    assert not error_messages.install()
    assert error_interpolation.parse_message is TENSORFLOW_PARSE


def test_an_easgd_train_task_runs_with_ours_installed(monkeypatch):
    monkeypatch.setattr(error_interpolation, "parse_message", TENSORFLOW_PARSE)
    seen = []

    def fake_run(task, config, reporter, started_at=None, rejoin=None):
        del task, config, reporter, started_at, rejoin
        seen.append(error_interpolation.parse_message)

    monkeypatch.setattr(task_runner, "run", fake_run)
    verbosity = absl_logging.get_verbosity()
    plan = types.SimpleNamespace(
        task=types.SimpleNamespace(name="worker 0"),
        config=types.SimpleNamespace(reuse_freed_memory=False),
    )
    try:
        assert cli.run_task(plan, started_at=0.0, progress_format="text") == 0
    finally:
        absl_logging.set_verbosity(verbosity)
    assert seen == [error_messages.parse_message]
