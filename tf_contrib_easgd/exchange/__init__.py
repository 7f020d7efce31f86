"""The exchange's machinery: how a worker and the centre meet every tau steps.

`elastic_exchange` builds an exchange step (a call per parameter server task), `halves` its
arithmetic on each side, `overlap` the overlapped exchange, `wire` the 16-bit wire,
`transport` the choice of a direct call or a `RemoteCall`, and `task_groups`, `gating`,
`graph_functions`, `variable_address` the graph pieces they are made of. Imports nothing
from the rest of the package but `job.recovery`. docs/DESIGN.md ("The exchange").
"""
