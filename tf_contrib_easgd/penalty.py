"""The elastic penalty's two forms, and the warning about contrib's default `rho`.

Between two exchanges a worker is pulled towards its local centre x~' (the centre as last
read). `ElasticAverageOptimizer(penalty=...)` chooses how:

- "gradient" (contrib's form, the default): rho * sum(l2_loss(x - x~')) is added to the
  loss, so its gradient rho * (x - x~') goes through the wrapped optimizer like the loss's
  own. Plain SGD then moves x by learning_rate * rho * (x - x~') per step, which the default
  rho = moving_rate / learning_rate makes moving_rate * (x - x~'). Momentum accumulates the
  pull (about 1 / (1 - momentum) times as strong), and adaptive optimizers (Adam, Adagrad,
  RMSProp, ...) rescale it per coordinate.
- "move" (the paper's form): every local step also moves x by
  -learning_rate * rho * (x_t - x~'), beside the wrapped optimizer's step and outside its
  slots, with x_t read before the step. With the default rho that is moving_rate * (x_t - x~')
  whatever the optimizer.
"""

import contextlib
import warnings

import tensorflow as tf

GRADIENT = "gradient"
MOVE = "move"
FORMS = (GRADIENT, MOVE)

# tf.compat.v1 optimizers keep their learning rate under one of these attribute names and
# offer no public accessor; the default `rho` needs it (contrib read only the first, so the
# default crashed with Adam: README fix 1).
_LEARNING_RATE_ATTRIBUTES = ("_learning_rate", "_lr")

#: Optimizers whose step is learning_rate * gradient, so that the default rho pulls by
#: exactly moving_rate per step ("plain SGD").
_PLAIN = (
    tf.compat.v1.train.GradientDescentOptimizer,
    tf.compat.v1.train.ProximalGradientDescentOptimizer,
)

_RMSPROP = tf.compat.v1.train.RMSPropOptimizer

#: What each adaptive optimizer does to the penalty's gradient, most specific class first.
_ADAPTIVE = (
    (
        tf.compat.v1.train.AdamOptimizer,
        "divides it per coordinate by the root of a running mean of squared gradients "
        "(after averaging it with beta1)",
    ),
    (
        _RMSPROP,
        "divides it per coordinate by the root of a running mean of squared gradients",
    ),
    (
        tf.compat.v1.train.AdagradDAOptimizer,
        "averages it with every past gradient (dual averaging) and rescales it per coordinate",
    ),
    (
        tf.compat.v1.train.ProximalAdagradOptimizer,
        "divides it per coordinate by the root of the accumulated squared gradients",
    ),
    (
        tf.compat.v1.train.AdagradOptimizer,
        "divides it per coordinate by the root of the accumulated squared gradients",
    ),
    (
        tf.compat.v1.train.AdadeltaOptimizer,
        "rescales it per coordinate by the ratio of two running root mean squares",
    ),
    (
        tf.compat.v1.train.FtrlOptimizer,
        "rescales it per coordinate by FTRL's accumulated learning rates",
    ),
)

# Messages already shown in this process: the warning comes once per distinct message (per
# optimizer class and momentum), however many optimizers a program builds.
_warned = set()


class ElasticPenaltyWarning(UserWarning):
    """The default rho's pull goes through a wrapped optimizer that is not plain SGD."""


def check_form(value):
    """Checks the `penalty` argument of `ElasticAverageOptimizer`.

    Args:
        value: the argument.

    Returns:
        `value`, one of `FORMS`.

    Raises:
        TypeError: if `value` is not a string.
        ValueError: if `value` is not "gradient" or "move".
    """
    if not isinstance(value, str):
        raise TypeError(
            f"penalty must be 'gradient' or 'move', got {value!r} of type {type(value).__name__}."
        )
    if value not in FORMS:
        raise ValueError(
            f"penalty must be 'gradient' (contrib's form: the penalty is added to the loss) or "
            f"'move' (the paper's form: the elastic move is applied beside the optimizer's "
            f"step), got {value!r}."
        )
    return value


def default_rho_pull(opt):
    """Says how the wrapped optimizer scales the gradient form's pull, or None for plain SGD.

    Args:
        opt: the wrapped `tf.compat.v1.train.Optimizer`.

    Returns:
        None if `opt` steps by learning_rate * gradient (gradient descent, proximal gradient
        descent, momentum 0), else the end of the sentence "the pull towards the local
        centre ...", e.g. "builds up, with momentum 0.9, to about 1 / (1 - 0.9) = 10x
        moving_rate per step".
    """
    if isinstance(opt, _PLAIN):
        return None
    if isinstance(opt, tf.compat.v1.train.MomentumOptimizer):
        momentum = getattr(opt, "_momentum", None)
        kind = "Nesterov momentum" if getattr(opt, "_use_nesterov", False) else "momentum"
        if isinstance(momentum, int | float):
            if momentum == 0:
                return None
            if 0 < momentum < 1:
                return (
                    f"builds up, with {kind} {momentum:g}, to about 1 / (1 - {momentum:g}) = "
                    f"{1 / (1 - momentum):.3g}x moving_rate per step"
                )
        return (
            f"builds up, with {kind} m, to about 1 / (1 - m) times moving_rate per step "
            "(10x for m = 0.9)"
        )
    for cls, effect in _ADAPTIVE:
        if isinstance(opt, cls):
            momentum = getattr(opt, "_momentum", 0.0) if cls is _RMSPROP else 0.0
            accumulates = ""
            if not isinstance(momentum, int | float):  # A tensor or a callable.
                accumulates = " (and its momentum accumulates it)"
            elif momentum:
                accumulates = f" (and its momentum {momentum:g} accumulates it)"
            return (
                f"is not moving_rate per step: {type(opt).__name__} {effect}{accumulates}, "
                "which makes it many times moving_rate where gradients are small"
            )
    return (
        f"is moving_rate per step only if {type(opt).__name__} steps by exactly "
        "learning_rate * gradient, which this library cannot tell (it knows "
        "tf.compat.v1.train's optimizers only)"
    )


def warn_if_default_rho_is_rescaled(opt, form, rho, stacklevel):
    """Warns, once per process and message, when the default rho's pull goes through `opt`.

    That is: `form` is "gradient", `rho` is None and `opt` is not plain gradient descent.

    Args:
        opt: the wrapped optimizer.
        form: the `penalty` argument.
        rho: the `rho` argument.
        stacklevel: passed to `warnings.warn`, to name the caller's line.
    """
    pull = default_rho_pull(opt) if form == GRADIENT and rho is None else None
    if pull is None:
        return
    message = (
        f"ElasticAverageOptimizer: with rho=None (contrib's default, moving_rate / "
        f"learning_rate) the elastic penalty rho * l2_loss(x - local_centre) is added to the "
        f"loss and its gradient goes through {type(opt).__name__}, so the pull towards the "
        f"local centre (refreshed only every communication_period steps) {pull}. This is "
        "contrib's trajectory, kept on purpose; it can stall training. Use rho=0.0 (the "
        "paper's asynchronous EASGD: no penalty, the exchange does the averaging) or "
        "penalty='move' (the paper's form: a move of exactly moving_rate * (x - local_centre) "
        "per step, beside the optimizer's step); pass rho explicitly to keep contrib's form "
        "without this warning. See docs/MIGRATING.md, 'The default rho with momentum or "
        "adaptive optimizers'."
    )
    if message in _warned:
        return
    _warned.add(message)
    warnings.warn(message, ElasticPenaltyWarning, stacklevel=stacklevel + 1)


def learning_rate_for(opt, form, rho):
    """Returns the learning rate of `opt` if the penalty needs it, else None.

    The gradient form needs it for the default rho (moving_rate / learning_rate), the move
    form for an explicit positive rho (it moves by learning_rate * rho).

    Args:
        opt: the wrapped optimizer.
        form: the `penalty` argument.
        rho: the `rho` argument.

    Returns:
        None, or the learning rate as `opt` holds it: a float, a tensor or a callable.

    Raises:
        ValueError: if the rate is needed and `opt` keeps none this library can read, or
            keeps a constant one <= 0.
    """
    if form == GRADIENT and rho is None:
        need = "The default rho is moving_rate / learning_rate"
        advice = "pass rho explicitly (rho=0.0 switches the elastic penalty off)"
    elif form == MOVE and rho:
        need = "penalty='move' moves by learning_rate * rho"
        advice = "pass rho=None (the move is then moving_rate per step) or rho=0.0"
    else:
        return None
    for attribute in _LEARNING_RATE_ATTRIBUTES:
        learning_rate = getattr(opt, attribute, None)
        if learning_rate is not None:
            break
    else:
        raise ValueError(
            f"{need}, but {type(opt).__name__} has no learning rate this library can read. "
            f"{advice[0].upper()}{advice[1:]}."
        )
    if isinstance(learning_rate, int | float) and learning_rate <= 0:
        raise ValueError(f"{need}, and the learning rate of opt is {learning_rate!r}; {advice}.")
    return learning_rate


def elastic_moves(form, centered, rho, moving_rate, learning_rate, device):
    """Builds the move form's elastic moves of one local step (none for the gradient form).

    Call it before the wrapped optimizer's update is built: it reads the variables.

    Args:
        form: the `penalty` argument.
        centered: the `CenteredVariable`s of the variables the step updates.
        rho: the `rho` argument: None (the default), 0.0 (no pull) or a positive float.
        moving_rate: the elastic rate alpha; with the default rho, eta * rho equals it.
        learning_rate: the wrapped optimizer's learning rate eta (float, tensor or callable)
            as `learning_rate_for` returned it; unused with the default rho.
        device: the worker device, where the copies and local centres live.

    Returns:
        An `ElasticMoves`, empty unless `form` is "move" and `rho` is not 0.
    """
    if form != MOVE or rho == 0:
        return ElasticMoves([], None, device)
    if rho is None:
        coefficient = moving_rate
    else:
        if callable(learning_rate):
            learning_rate = learning_rate()
        if isinstance(learning_rate, int | float):
            coefficient = float(learning_rate) * rho
        else:
            coefficient = learning_rate * rho
    return ElasticMoves(centered, coefficient, device)


class ElasticMoves:
    """The move form's elastic moves of one local step, x <- x - eta * rho * (x_t - x~').

    Built before the wrapped optimizer's update: the deltas eta * rho * (x_t - x~') are new
    tensors computed from reads of x_t and of its local centre. `before()` makes the update
    wait for all of them, so that every read happens before the update changes x (in TF1
    mode a ref variable's read aliases its buffer until the subtraction copies it; in TF 2
    graph mode nothing else orders a resource variable's read before an update). `after()`
    subtracts them once the update is done. With no moves both are no-ops and add nothing
    to the graph.
    """

    def __init__(self, centered, coefficient, device):
        """Computes the deltas.

        Args:
            centered: the `CenteredVariable`s to move; empty for no move.
            coefficient: eta * rho, a float or a scalar tensor (unused if `centered` is
                empty).
            device: the worker device.
        """
        self._device = device
        self._moves = []
        if not centered:
            return
        with tf.compat.v1.device(device), tf.name_scope("elastic_move"):
            for entry in centered:
                dtype = entry.worker.dtype.base_dtype
                if isinstance(coefficient, float):
                    scale = tf.constant(coefficient, dtype)
                else:
                    scale = tf.cast(coefficient, dtype)
                # The same point as the gradient form's penalty, rho * l2_loss(x - x~').
                distance = entry.worker - entry.local_center
                self._moves.append((entry.worker, scale * distance))

    @property
    def deltas(self):
        """The tensors eta * rho * (x_t - x~'), one per variable."""
        return [delta for _, delta in self._moves]

    def before(self):
        """A context in which the ops built (the wrapped optimizer's update) wait for the deltas."""
        if not self._moves:
            return contextlib.nullcontext()
        return tf.control_dependencies(self.deltas)

    def after(self, update, use_locking):
        """Returns an op that runs `update`, then subtracts each delta from its variable.

        Args:
            update: the wrapped optimizer's update op.
            use_locking: whether the subtractions take locks.

        Returns:
            `update` itself when there is no move.
        """
        if not self._moves:
            return update
        with (
            tf.compat.v1.device(self._device),
            tf.name_scope("elastic_move"),
            tf.control_dependencies([update]),
        ):
            return tf.group(
                *(
                    tf.compat.v1.assign_sub(variable, delta, use_locking=use_locking)
                    for variable, delta in self._moves
                )
            )
