"""`tf.device(<device function>)` -> `tf.compat.v1.device(...)`: TF 2's takes strings only.

A helper of `tf_contrib_easgd.migrate.codemod`: which arguments are provably device strings
(left alone), and the `tf.compat.v1.device` spelled from the module's own `tensorflow`.
"""

import libcst as cst


def is_device_string(node, string_values, depth):  # noqa: PLR0911 -- a return per kind.
    """Whether `node` is provably a device string (or None), following `depth` names.

    Args:
        node: the expression passed to `tf.device`.
        string_values: variable name -> the expressions assigned to it (`Facts`).
        depth: how many variable names may still be followed to their values.
    """
    if isinstance(node, cst.SimpleString | cst.ConcatenatedString | cst.FormattedString):
        return True
    if isinstance(node, cst.Name):
        values = string_values.get(node.value, ())
        return node.value == "None" or (
            depth > 0
            and bool(values)
            and all(is_device_string(v, string_values, depth - 1) for v in values)
        )
    if isinstance(node, cst.BinaryOperation):
        return isinstance(node.operator, cst.Modulo | cst.Add) and is_device_string(
            node.left, string_values, depth
        )
    if isinstance(node, cst.IfExp):
        return is_device_string(node.body, string_values, depth) and is_device_string(
            node.orelse, string_values, depth
        )
    if isinstance(node, cst.Attribute):
        return node.attr.value == "device"  # `variable.device`, `op.device`.
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        return method == "to_string" or (
            method in ("format", "join") and is_device_string(node.func.value, string_values, depth)
        )
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
        return node.func.value == "str"
    return False


def compat_v1_device(func, needs):
    """Returns `<tensorflow>.compat.v1.device` for the `func` of a `tf.device` call.

    The module's own spelling of `tensorflow` is kept (`func.value` of `tf.device`); for a
    `device(...)` imported from it, the name bound to `tensorflow`, which `needs` (an
    `ImportNeeds`) then notes.
    """
    base = func.value if isinstance(func, cst.Attribute) else cst.Name(needs.tensorflow_name())
    for attr in ("compat", "v1", "device"):
        base = cst.Attribute(value=base, attr=cst.Name(attr))
    return base
