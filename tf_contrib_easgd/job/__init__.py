"""A job's life around the algorithm: its sessions' start (`sessions`), its end
(`completion`), its recovery from lost tasks (`recovery`), and the C allocator's setting
for exchanges (`freed_memory`). Imports nothing from the rest of the package."""
