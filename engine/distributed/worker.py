"""Starting the ranks of a context-parallel engine, and the entry point of ranks 1..N-1.

`start_ranks` (rank 0, inside `LLM`) starts N - 1 fresh interpreters (`python -m engine.distributed.worker SPEC`,
no fork of the caller's threads and no re-import of its __main__), which rendezvous with it over TCP on loopback.
Ranks started by another launcher (torchrun, a cluster manager) attach instead: every rank but 0 calls
`serve_rank()` after initialising the default process group, and rank 0 builds `LLM(...,
context_parallel_size=N)`, which then uses that group and sends them its settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from engine.config import EngineConfig
from engine.devices import DTYPES
from engine.distributed.attention import context_parallel_kernels
from engine.distributed.comm import IDLE_TIMEOUT, Comm
from engine.distributed.runner import ContextParallelRunner, serve
from engine.kv_pool import allocate_kv_pool
from engine.models.checkpoint import Checkpoint, open_checkpoint
from engine.models.loader import build_model
from engine.models.lora import LoraAdapter, read_lora
from kernels import get_kernels


@dataclass(frozen=True)
class RankSpec:
    """What every rank builds from: the engine's own config (dtype, device type and the per-rank KV budget
    resolved by rank 0), sent as JSON on the command line or broadcast to attached ranks."""

    config: EngineConfig
    threads: int = 0  # torch threads of a started rank (0: leave as is)

    @property
    def world_size(self) -> int:
        return self.config.context_parallel_size

    def rank_device(self, rank: int) -> torch.device:
        return torch.device(f"cuda:{rank}") if self.config.device == "cuda" else torch.device("cpu")

    def to_json(self) -> str:
        return json.dumps({"config": self.config.model_dump(mode="json"), "threads": self.threads})

    @classmethod
    def from_json(cls, text: str) -> RankSpec:
        raw = json.loads(text)
        return cls(config=EngineConfig.model_validate(raw["config"]), threads=raw["threads"])


def build_runner(spec: RankSpec, comm: Comm, ckpt: Checkpoint | None = None,
                 lora: LoraAdapter | None = None) -> ContextParallelRunner:
    """This rank's model (context-parallel attention inside) and KV shard; rank 0 passes the checkpoint and
    adapter it has already read."""
    c = spec.config
    assert c.kv_cache_memory is not None and c.max_model_len is not None  # resolved by rank 0
    ckpt = ckpt or open_checkpoint(c.model_dir)
    device = comm.device
    dtype = DTYPES[c.dtype]
    kernels = context_parallel_kernels(get_kernels(device, prefer=c.kernels), comm)
    if lora is None and c.adapter is not None:
        lora = read_lora(c.adapter)
    model = build_model(ckpt, dtype, device, kernels, c.quantization, lora)
    pool = allocate_kv_pool(ckpt.config, dtype, device, c.block_size, c.kv_cache_memory, c.kv_cache_dtype == "int8")
    return ContextParallelRunner(model, comm, pool, dtype=dtype, device=device, max_model_len=c.max_model_len)


READY_TIMEOUT = 600.0  # seconds rank 0 waits for the other ranks to load the model


class RankGroup:
    """Rank 0's handle on the other ranks: started processes (or an attached group) and their rendezvous."""

    def __init__(self, spec: RankSpec) -> None:
        self.spec = spec
        self.procs: list[subprocess.Popen[bytes]] = []
        self.store: dist.TCPStore | None = None
        device = spec.rank_device(0)
        if dist.is_initialized():
            self.comm = Comm.attach(spec.world_size, device)
            if self.comm.rank != 0:
                raise ValueError("LLM(context_parallel_size=N) runs on rank 0; the other ranks call "
                                 "engine.distributed.serve_rank()")
            self.comm.broadcast_object(spec)  # what serve_rank() builds on the other ranks
            return
        self.comm = Comm(0, spec.world_size, device)
        self.store = dist.TCPStore("127.0.0.1", 0, spec.world_size, is_master=True, timeout=IDLE_TIMEOUT,
                                   wait_for_workers=False)
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.procs = [subprocess.Popen([sys.executable, "-m", "engine.distributed.worker", spec.to_json(),
                                        str(rank), str(self.store.port), str(os.getpid())],
                                       env=env, stdin=subprocess.DEVNULL)
                      for rank in range(1, spec.world_size)]

    def connect(self) -> None:
        """After rank 0 built its own shard: wait until every started rank has built its model (or report the one
        that failed), then form the process group."""
        if self.store is None:
            _agree_ready(self.comm, None)
            return
        deadline = time.monotonic() + READY_TIMEOUT
        for rank, proc in enumerate(self.procs, start=1):
            while not self.store.check([f"ready{rank}"]):
                if self.store.check([f"error{rank}"]):
                    raise RuntimeError(f"context-parallel rank {rank} failed to start: "
                                       f"{self.store.get(f'error{rank}').decode()}")
                if proc.poll() is not None:
                    raise RuntimeError(f"context-parallel rank {rank} exited with code {proc.returncode} "
                                       "before it was ready")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"context-parallel rank {rank} was not ready after {READY_TIMEOUT:.0f} s")
                time.sleep(0.05)
        self.comm.init_group(self.store)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the started ranks (they exit on the empty plan the runner sent, or are killed) and the group."""
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        self.comm.close()


def _agree_ready(comm: Comm, error: str | None) -> None:
    """Every rank of an attached group says whether it built its shard; all raise if one did not."""
    errors = [None] * comm.world_size
    dist.all_gather_object(errors, error, group=comm.control)
    failed = [f"rank {r}: {e}" for r, e in enumerate(errors) if e is not None]
    if failed:
        raise RuntimeError("context-parallel ranks failed to start: " + "; ".join(failed))


def serve_rank() -> None:
    """Ranks 1..N-1 of a process group the caller initialised (torchrun, a cluster launcher): take the engine's
    settings from rank 0, which builds `LLM(..., context_parallel_size=N)`, and serve its steps until it closes."""
    comm = Comm.attach(dist.get_world_size(), torch.device("cpu"))
    spec: RankSpec = comm.broadcast_object()
    comm.device = spec.rank_device(comm.rank)
    try:
        runner = build_runner(spec, comm)
    except Exception as exc:
        _agree_ready(comm, f"{type(exc).__name__}: {exc}")
        raise
    _agree_ready(comm, None)
    serve(runner)


def _exit_with_parent(parent: int) -> None:
    """A rank blocked in a collective cannot notice that rank 0 died; this thread ends it when that happens."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)


def main(argv: list[str]) -> None:
    spec = RankSpec.from_json(argv[0])
    rank, port, parent = int(argv[1]), int(argv[2]), int(argv[3])
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    if spec.threads:
        torch.set_num_threads(spec.threads)
    store = dist.TCPStore("127.0.0.1", port, spec.world_size, is_master=False, timeout=IDLE_TIMEOUT)
    comm = Comm(rank, spec.world_size, spec.rank_device(rank))
    try:
        runner = build_runner(spec, comm)
    except Exception as exc:
        store.set(f"error{rank}", f"{type(exc).__name__}: {exc}")
        raise
    store.set(f"ready{rank}", "1")
    comm.init_group(store)
    try:
        serve(runner)
    finally:
        comm.close()


if __name__ == "__main__":
    main(sys.argv[1:])
