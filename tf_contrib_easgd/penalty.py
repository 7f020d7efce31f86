"""The elastic penalty: its two forms, rho, and the warning about contrib's default rho.

Between two exchanges a worker is pulled towards its local centre, either through the loss
("gradient", contrib's form) or as a move of its own beside the wrapped optimizer's step
("move", the paper's form: elastic_moves.py). `ElasticPenalty` is one optimizer's.
docs/DESIGN.md ("The elastic penalty").
"""

import warnings

import tensorflow as tf

from tf_contrib_easgd.elastic_moves import ElasticMoves

GRADIENT = "gradient"
MOVE = "move"
FORMS = (GRADIENT, MOVE)

# tf.compat.v1 optimizers keep their learning rate under one of these attribute names and
# offer no public accessor; the default `rho` needs it (contrib read only the first, so the
# default crashed with Adam: contrib fix 1).
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


class ElasticPenalty:
    """The elastic pull of one `ElasticAverageOptimizer` between exchanges: form and rho."""

    def __init__(self, opt, form, rho, moving_rate, stacklevel):
        """Checks `form`, reads the learning rate of `opt` if needed, and warns (once per
        process and message) if the default rho's pull goes through an optimizer that is
        not plain SGD.

        Args:
            opt: the wrapped optimizer.
            form: the `penalty` argument.
            rho: the `rho` argument: None (the default), 0.0 (no pull) or a positive float.
            moving_rate: the elastic rate alpha, its default computed.
            stacklevel: for the warning: 1 names the line that makes the `ElasticPenalty`,
                2 the line that calls that one, and so on.

        Raises:
            TypeError, ValueError: as `check_form` and `learning_rate_for`.
        """
        self.form = check_form(form)
        self._rho = rho
        self._moving_rate = moving_rate
        self._learning_rate = learning_rate_for(opt, self.form, rho)
        warn_if_default_rho_is_rescaled(opt, self.form, rho, stacklevel=stacklevel + 1)

    def add_to(self, loss, centered):
        """Returns `loss` + rho * sum(l2_loss(x - x~')) in the gradient form, else `loss`.

        Args:
            loss: the loss tensor.
            centered: the `CenteredVariable`s, each variable x with its own local centre x~'.
        """
        if self.form != GRADIENT:
            return loss
        rho = self._rho_tensor(loss.dtype)
        if rho is None or not centered:
            return loss
        with tf.name_scope("elastic_penalty"):
            distances = [
                tf.cast(tf.nn.l2_loss(entry.worker - entry.local_center), loss.dtype)
                for entry in centered
            ]
            return loss + rho * tf.add_n(distances)

    def moves(self, centered, device):
        """Builds the move form's elastic moves of one local step (none for the gradient form).

        Call it before the wrapped optimizer's update is built: it reads the variables.

        Args:
            centered: the `CenteredVariable`s of the variables the step updates.
            device: the worker device, where the copies and local centres live.

        Returns:
            An `ElasticMoves`, empty unless the form is "move" and rho is not 0.
        """
        rho = self._rho
        if self.form != MOVE or rho == 0:
            return ElasticMoves([], None, device)
        if rho is None:  # eta * rho = moving_rate, whatever eta.
            return ElasticMoves(centered, self._moving_rate, device)
        learning_rate = self._learning_rate
        if callable(learning_rate):
            learning_rate = learning_rate()
        if isinstance(learning_rate, int | float):
            return ElasticMoves(centered, float(learning_rate) * rho, device)
        return ElasticMoves(centered, learning_rate * rho, device)

    def contrib_rho(self):
        """Returns rho as contrib's optimizer held it (its `_rho`), the default computed.

        `rho` when one was given; for the default, `moving_rate / learning_rate`: a float
        for a constant learning rate, a new float32 tensor on each call for a tensor or
        callable one; None for a default that reads no learning rate (the move form).
        """
        if self._rho is not None or self._learning_rate is None:
            return self._rho
        if isinstance(self._learning_rate, int | float):
            return self._moving_rate / self._learning_rate
        return self._rho_tensor(tf.float32)

    def _rho_tensor(self, dtype):
        """Returns rho as a `dtype` tensor, the default computed, or None when it is 0."""
        if self._rho is not None:
            return tf.constant(self._rho, dtype) if self._rho > 0 else None
        learning_rate = self._learning_rate
        if isinstance(learning_rate, int | float):
            # Divided in Python, rounded to `dtype` once, as contrib did: a float32 division
            # can be one ulp off (0.3 / 0.02 gives 15.000001, not 15.0).
            return tf.constant(self._moving_rate / learning_rate, dtype)
        if callable(learning_rate):
            learning_rate = learning_rate()
        return tf.cast(self._moving_rate, dtype) / tf.cast(learning_rate, dtype)
