"""CPU threading defaults that must be in place before torch (and its OpenMP runtime) loads.

With OpenMP's default spin-waiting, every parallel region stalls whenever another process holds a core (a shared
CI box, a Prefect worker next to other jobs). Measured on the 2-core dev box under a load of ~6, a 2-thread decode
step of a tiny model: 78-143 ms spinning vs 10.3 ms passive (1 thread: 9.5 ms). So passive waiting is the default;
set OMP_WAIT_POLICY yourself to override it.
"""

from __future__ import annotations

import os
import sys


def configure_cpu_threads() -> None:
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
