"""What machine a number came from, how fast its dense GEMM is, and how much memory a system peaked at."""

from __future__ import annotations

import os
import platform
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


def usable_cores() -> int:
    """Cores this process may run on (respects taskset/cgroup affinity, unlike os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info(device: str, threads: int) -> dict[str, Any]:
    import transformers

    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "torch_threads": threads,
        "total_memory_bytes": _total_memory(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(gpu_name=props.name, gpu_memory_bytes=props.total_memory, cuda=torch.version.cuda)
    return info


def _total_memory() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_gemm_peak(device: str, dtype: torch.dtype = torch.bfloat16, size: int | None = None, reps: int = 8) -> dict[str, Any]:
    """Best-of-N dense square matmul rate: the MFU denominator, measured here and now rather than from a spec sheet.

    Where one product takes over a second (bf16 on a CPU without bf16 instructions runs ~100x below float32), the
    size halves, down to 256, so the measurement stays a few seconds and still reports this machine's rate."""
    n = size or (8192 if device.startswith("cuda") else 2048)
    while True:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        t0 = time.perf_counter()
        torch.mm(a, b)  # warms caches, thread pools and (on GPU) cuBLAS heuristics
        _sync(device)
        if size is not None or n <= 256 or time.perf_counter() - t0 < 1.0:
            break
        n //= 2
    torch.mm(a, b)
    _sync(device)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    flops = 2.0 * n * n * n
    return {"dtype": str(dtype).removeprefix("torch."), "m": n, "n": n, "k": n, "reps": reps, "best_s": best,
            "flops_per_s": flops / best}


@dataclass
class PeakMemory:
    """Peak memory of one system: host RSS high-water mark and, on GPU, the allocator's peak."""

    rss_peak_bytes: int | None
    rss_start_bytes: int | None
    rss_method: str
    device_peak_bytes: int | None = None


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakMemoryTracker:
    """Resets the kernel's RSS high-water mark at start (Linux clear_refs), so the peak belongs to this system only.

    Workers run one system per process, so where the reset is not permitted the process-lifetime maximum is still
    that system's own peak (method recorded as 'ru_maxrss').
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.method = "ru_maxrss"
        self.start: int | None = None

    def __enter__(self) -> "PeakMemoryTracker":
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.method = "VmHWM (reset at start)"
        except OSError:
            self.method = "ru_maxrss"
        self.start = _status_kb("VmRSS")
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def result(self) -> PeakMemory:
        if self.method.startswith("VmHWM"):
            peak = _status_kb("VmHWM")
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
        dev = torch.cuda.max_memory_allocated() if self.device.startswith("cuda") else None
        return PeakMemory(rss_peak_bytes=peak, rss_start_bytes=self.start, rss_method=self.method, device_peak_bytes=dev)
