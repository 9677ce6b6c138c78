"""What this process may use of the machine."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (respects taskset/cgroup affinity, unlike os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
