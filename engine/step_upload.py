"""Moving a step's index lists to the device in one transfer.

A step needs a handful of small int64 tensors (token ids, positions, cache slots, logits rows, block tables, KV
lengths). Built one by one with `torch.tensor(..., device="cuda")`, each is a blocking copy from pageable memory;
here they are concatenated on the host, pinned, copied once without blocking, and split into views on the device.
The only device-to-host transfer of a step is then the sampler's (the sampled tokens).
"""

from __future__ import annotations

from itertools import chain
from typing import Sequence

import torch


def upload_int64(device: torch.device, *lists: Sequence[int]) -> list[torch.Tensor]:
    """One int64 tensor per list, on `device`, from a single host-to-device copy (pinned, asynchronous on CUDA;
    on CPU the split views of one tensor). The host buffer may be freed at once: PyTorch's pinned-memory cache
    keeps it until the copy has run."""
    sizes = [len(x) for x in lists]
    host = torch.tensor(list(chain.from_iterable(lists)), dtype=torch.int64)
    if device.type == "cuda":
        flat = host.pin_memory().to(device, non_blocking=True)
    else:
        flat = host.to(device)
    return list(flat.split(sizes))
