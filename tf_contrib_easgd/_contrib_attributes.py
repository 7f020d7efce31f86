"""The private attributes of contrib's optimizer that code written against it read.

`ElasticAverageOptimizer` inherits them. Besides the three here, `_opt`, `_num_worker`,
`_period`, `_moving_rate` (its default computed), `_synchronous`, `_local_step`,
`_use_locking` and `_name` read as in contrib, set by the optimizer itself.
"""


class ContribAttributes:
    """Contrib's private `_rho`, `_local_map` and `_global_map`, read-only."""

    @property
    def _rho(self):
        """Contrib compatibility: rho as contrib held it, the default computed (a float,
        or a new tensor on each read for a tensor or callable learning rate; None for the
        default with penalty="move", which reads no learning rate)."""
        return self._elastic_penalty.contrib_rho()

    @property
    def _local_map(self):
        """Contrib compatibility: the getter's `_local_map`, worker copy (or partition) ->
        local centre; prefer `ea_custom_getter.find(v).local_center`."""
        return self._getter._local_map  # noqa: SLF001 (the same view, as contrib shared it)

    @property
    def _global_map(self):
        """Contrib compatibility: the getter's `_global_map`, worker copy (or partition) ->
        global centre; prefer `ea_custom_getter.find(v).global_center`."""
        return self._getter._global_map  # noqa: SLF001 (the same view, as contrib shared it)
