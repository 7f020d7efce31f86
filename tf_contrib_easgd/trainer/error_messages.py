"""A one-pass reading of the node tags in the messages of TensorFlow's session errors.

When `Session.run` fails, TensorFlow appends to the message where each `{{node name}}`
tag's node was defined (`error_interpolation.interpolate_graph`), with a parser whose time
grows with the square of the text after the last tag, holding the GIL (docs/RELIABILITY.md,
"Chaos soak"). `install()` gives TensorFlow `parse_message` here instead, which finds the
same tags in one pass and returns the same result. easgd-train's tasks install it.
"""

import re

from tensorflow.python.framework import error_interpolation

# TensorFlow's own tag pattern and tuple (TF 2.15 and 2.21 alike); `install` checks both.
_TAG_REGEX = getattr(error_interpolation, "_TAG_REGEX", None)
_PARSE_TAG = getattr(error_interpolation, "_ParseTag", None)
_TAG = re.compile(_TAG_REGEX) if _TAG_REGEX else None
FUNCTION_NODE = "function_node"


def parse_message(message):
    """Splits `message` as `error_interpolation.parse_message` does, in one pass.

    Args:
        message: the text of an error, possibly with `{{type name}}` tags.

    Returns:
        `(text, function_tags, node_tags)`: `message` without its `{{function_node ...}}`
        tags, then the function tags and the other tags, each in order, as TensorFlow's
        `_ParseTag(type, name)` tuples.
    """
    text, function_tags, node_tags = [], [], []
    end = 0
    for match in _TAG.finditer(message):
        tag = _PARSE_TAG(match.group("type"), match.group("name"))
        text.append(message[end : match.start()])
        if tag.type == FUNCTION_NODE:
            function_tags.append(tag)
        else:
            text.append(match.group())
            node_tags.append(tag)
        end = match.end()
    text.append(message[end:])
    return "".join(text), function_tags, node_tags


def install():
    """Makes TensorFlow's error interpolation use `parse_message`, for this process.

    Returns:
        True if installed (or already), False if this TensorFlow's `error_interpolation`
        lacks what it replaces; its own parser then stays.
    """
    if _TAG is None or _PARSE_TAG is None:
        return False
    if not callable(getattr(error_interpolation, "parse_message", None)):
        return False
    error_interpolation.parse_message = parse_message
    return True
