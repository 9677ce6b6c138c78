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

from pipeline.machine import usable_cores


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
    # lazy: heavy, and only the HF baselines and loading checks need it
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


def _best_time(fn, device: str, reps: int) -> float:
    """Fastest of `reps` timed calls after one untimed warm-up (caches, thread pools, cuBLAS heuristics)."""
    fn()
    _sync(device)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def _square_operands(n: int, device: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    if dtype == torch.int8:
        return (torch.randint(-127, 128, (n, n), dtype=torch.int8, device=device),
                torch.randint(-127, 128, (n, n), dtype=torch.int8, device=device))
    return torch.randn(n, n, device=device).to(dtype), torch.randn(n, n, device=device).to(dtype)


def _product(dtype: torch.dtype):
    # int8 x int8 -> int32 is the GEMM the int8 rungs run (torch's oneDNN path; VNNI where the CPU has it).
    return torch._int_mm if dtype == torch.int8 else torch.mm


def measure_gemm_peak(device: str, dtype: torch.dtype = torch.bfloat16, size: int | None = None, reps: int = 8) -> dict[str, Any]:
    """Best-of-N dense square matmul rate (int8 counts multiply-adds as 2 ops, like FLOPs): the MFU denominator
    and the floor model's compute rate, measured here and now rather than from a spec sheet.

    `size` is the first size tried (default 8192 on GPU, 2048 on CPU). Where one product takes over a second
    (bf16 or int8 on a CPU without their instructions runs far below float32), the size halves, down to 256, so
    the measurement stays a few seconds and still reports this machine's rate."""
    n = size or (8192 if device.startswith("cuda") else 2048)
    mm = _product(dtype)
    while True:
        a, b = _square_operands(n, device, dtype)
        t0 = time.perf_counter()
        mm(a, b)  # warms caches, thread pools and (on GPU) cuBLAS heuristics
        _sync(device)
        if n <= 256 or time.perf_counter() - t0 < 1.0:
            break
        n //= 2
    best = _best_time(lambda: mm(a, b), device, reps)
    flops = 2.0 * n * n * n
    return {"dtype": str(dtype).removeprefix("torch."), "m": n, "n": n, "k": n, "reps": reps, "best_s": best,
            "flops_per_s": flops / best}


def measure_int8_peak(device: str, n: int = 2048, reps: int = 8) -> dict[str, Any]:
    """The faster of torch's int8 GEMM and, on CPU where it builds, the engine's own packed-weight W8A8 linear
    (kernels/cpu/int8_gemm.cpp, its activation quantization included) on an n x n x n product: the best int8
    rate this machine offers, so the floor is not set by a slower library than the engine uses."""
    best = measure_gemm_peak(device, torch.int8, size=n, reps=reps) | {"source": "torch._int_mm"}
    if not device.startswith("cpu"):
        return best
    from kernels.dispatch import get_kernels  # noqa: PLC0415

    linear = get_kernels("cpu").int8_linear
    if getattr(linear, "pack_weight", None) is None:
        return best
    x = torch.randn(n, n).to(torch.bfloat16)
    w = linear.pack_weight(torch.randint(-127, 128, (n, n), dtype=torch.int8))
    scale = torch.rand(n, dtype=torch.float32)
    t = _best_time(lambda: linear(x, w, scale, None, packed=True), device, reps)
    if 2.0 * n**3 / t > best["flops_per_s"]:
        best = {"dtype": "int8", "m": n, "n": n, "k": n, "reps": reps, "best_s": t, "flops_per_s": 2.0 * n**3 / t,
                "source": "engine W8A8 linear (kernels/cpu)", "torch_int_mm_flops_per_s": best["flops_per_s"]}
    return best


def measure_read_bandwidth(device: str, nbytes: int = 512 << 20, reps: int = 5) -> dict[str, Any]:
    """Best-of-N rate of one streaming read (a sum over a buffer far larger than the caches): the rate at which
    decode can read weights and KV, the floor model's memory term."""
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    best = _best_time(x.sum, device, reps)
    return {"bytes": x.numel() * 4, "reps": reps, "best_s": best, "bytes_per_s": x.numel() * 4 / best}


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
