"""Triton kernels. Importing this package never imports triton: callers ask `available()` first and then
import the kernel modules, so the project runs (on the torch references) where triton is not installed."""

from __future__ import annotations

import importlib.util


def available() -> bool:
    """True when the `triton` package can be imported (it may still lack a GPU; see TRITON_INTERPRET)."""
    return importlib.util.find_spec("triton") is not None
