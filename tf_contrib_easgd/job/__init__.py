"""A job's life around the algorithm: its sessions' start (`sessions`), its end with the
account of its work (`ledger`, on `ledger_variables`; `completion`, the end without one, and
the parameter servers' stop), its recovery from lost tasks (`recovery`), and the C
allocator's setting for exchanges (`freed_memory`). Imports nothing from the rest of the
package."""
