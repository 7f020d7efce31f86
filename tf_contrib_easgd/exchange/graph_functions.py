"""Graph functions in a TF1 graph: define one, end its body, call it.

The exchange and the transport probe are such functions, called by one op on the worker.
docs/DESIGN.md ("The exchange") says why they are functions and never inlined.
"""

import tensorflow as tf


def define_function(python_function, signature, noinline=False):
    """Traces `python_function` once and adds it to the default graph's function library.

    Args:
        python_function: builds the body; its `__name__` names the function.
        signature: the `tf.TensorSpec`s of its arguments.
        noinline: mark it `_noinline`. A function called with `StatefulPartitionedCall`
            whose ops live on a parameter server needs it: a session would otherwise inline
            the call into the step's graph and give every step a ps partition. (A
            `RemoteCall` refuses such a function.)

    Returns:
        The concrete function.
    """
    attributes = {"_noinline": True} if noinline else None
    with tf.compat.v1.device(None):
        function = tf.function(
            python_function, autograph=False, experimental_attributes=attributes
        ).get_concrete_function(*signature)
        function.add_to_graph(tf.compat.v1.get_default_graph())
    return function


def return_after(updates, outputs):
    """Ends the body of a function being traced: returns `outputs` once every op of `updates`
    has run, and makes every call run `updates` whatever the caller uses of its outputs.

    `tf.function` lists a function's stateful ops as its control outputs, which a session
    runs even when the caller uses no output; it leaves out the updates of ref variables
    (`Assign`, `AssignAdd`, `AssignSub` are not stateful ops). A call whose output only a
    control dependency uses would then lose them: the session's optimizer prunes an unused
    output with all that only it needs. This lists them too.

    Args:
        updates: the operations of the body that change state.
        outputs: the tensors to return.

    Returns:
        A list of identities of `outputs` that wait for `updates`.
    """
    graph = tf.compat.v1.get_default_graph()
    graph.control_outputs.extend(op for op in updates if not op.op_def.is_stateful)
    with tf.control_dependencies(updates):
        return [tf.identity(output) for output in outputs]


def call_function(function, name):
    """Builds a call of a function of no argument and one bool output (an exchange's);
    returns the output, True once the function's work is done."""
    (done,) = tf.raw_ops.StatefulPartitionedCall(args=[], Tout=[tf.bool], f=function, name=name)
    return done
