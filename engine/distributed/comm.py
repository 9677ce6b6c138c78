"""The ranks' process group: gloo on CPU, NCCL on CUDA (plans always travel over gloo, as pickled objects)."""

from __future__ import annotations

import datetime as dt
import pickle
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

# Ranks wait for rank 0's next plan between generate() calls, for as long as the LLM lives.
IDLE_TIMEOUT = dt.timedelta(days=7)


@dataclass
class _Done:
    buf: torch.Tensor

    def wait(self) -> torch.Tensor:
        return self.buf


@dataclass
class _Pending:
    buf: torch.Tensor
    reqs: list[Any]

    def wait(self) -> torch.Tensor:
        for r in self.reqs:
            r.wait()
        return self.buf


class Comm:
    """What the context-parallel engine needs from torch.distributed, over the default process group."""

    def __init__(self, rank: int, world_size: int, device: torch.device) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.nccl = device.type == "cuda"
        self.owns_group = False  # created by init_group (and destroyed by close), or the caller's
        self.control: Any = None  # a gloo group for plans when the tensors go over NCCL

    def init_group(self, store: dist.Store) -> None:
        """Create the default group of `world_size` ranks over `store` (every rank calls this)."""
        dist.init_process_group("nccl" if self.nccl else "gloo", store=store, rank=self.rank,
                                world_size=self.world_size, timeout=IDLE_TIMEOUT)
        self.owns_group = True
        if self.nccl:
            self.control = dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT)

    @classmethod
    def attach(cls, world_size: int, device: torch.device) -> Comm:
        """Use the caller's initialised default group (e.g. ranks started by torchrun)."""
        if dist.get_world_size() != world_size:
            raise ValueError(f"context_parallel_size={world_size} but the initialised process group has "
                             f"{dist.get_world_size()} ranks")
        comm = cls(dist.get_rank(), world_size, device)
        comm.nccl = dist.get_backend() == "nccl"
        if comm.nccl:
            comm.control = dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT)
        return comm

    # ---- plans (rank 0 -> all) ----------------------------------------------------------------------------------
    def broadcast_object(self, obj: Any = None) -> Any:
        """Rank 0 sends `obj` (pickled, length first); every rank returns it."""
        if self.rank == 0:
            data = torch.frombuffer(bytearray(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)), dtype=torch.uint8)
            size = torch.tensor([data.numel()], dtype=torch.long)
        else:
            size = torch.zeros(1, dtype=torch.long)
        dist.broadcast(size, 0, group=self.control)
        if self.rank != 0:
            data = torch.empty(int(size), dtype=torch.uint8)
        dist.broadcast(data, 0, group=self.control)
        return obj if self.rank == 0 else pickle.loads(data.numpy().tobytes())

    # ---- tensors ------------------------------------------------------------------------------------------------
    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's `t` (same shape everywhere), in rank order."""
        parts = [torch.empty_like(t) for _ in range(self.world_size)]
        dist.all_gather(parts, t.contiguous())
        return parts

    def send(self, t: torch.Tensor, dst: int) -> None:
        dist.send(t.contiguous(), dst)

    def recv(self, buf: torch.Tensor, src: int) -> torch.Tensor:
        dist.recv(buf, src)
        return buf

    def ring_exchange(self, send: torch.Tensor, recv: torch.Tensor) -> _Done | _Pending:
        """Send `send` to the next rank and receive `recv` from the previous one; `.wait()` gives `recv`.

        NCCL: both posted at once (batch_isend_irecv), so the caller computes on the current block while the next
        one travels (double buffering). gloo: paired blocking send/recv, even ranks sending first and odd ranks
        receiving first, which cannot deadlock for any ring size (batch_isend_irecv is not reliable on gloo).
        Both sides know every size from the step plan, so an empty block is neither sent nor awaited."""
        nxt = (self.rank + 1) % self.world_size
        prv = (self.rank - 1) % self.world_size
        if self.nccl:
            ops = []
            if send.numel():
                ops.append(dist.P2POp(dist.isend, send.contiguous(), nxt))
            if recv.numel():
                ops.append(dist.P2POp(dist.irecv, recv, prv))
            return _Pending(recv, dist.batch_isend_irecv(ops) if ops else [])
        send = send.contiguous()
        if self.rank % 2 == 0:
            if send.numel():
                dist.send(send, nxt)
            if recv.numel():
                dist.recv(recv, prv)
        else:
            if recv.numel():
                dist.recv(recv, prv)
            if send.numel():
                dist.send(send, nxt)
        return _Done(recv)

    def close(self) -> None:
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
