"""Seeded request generation for the standard workload: token-id prompts, so every system sees identical inputs."""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass

from bench.config import WorkloadSpec


@dataclass(frozen=True)
class BenchRequest:
    """One request: prompt token ids and the exact number of tokens to generate (ignore_eos)."""

    index: int
    prompt_token_ids: tuple[int, ...]
    output_len: int


@dataclass(frozen=True)
class Workload:
    spec: WorkloadSpec
    vocab_size: int
    requests: tuple[BenchRequest, ...]

    @property
    def total_prompt_tokens(self) -> int:
        return sum(len(r.prompt_token_ids) for r in self.requests)

    @property
    def total_output_tokens(self) -> int:
        return sum(r.output_len for r in self.requests)

    def fingerprint(self) -> str:
        """Hash of the exact inputs, so results from different runs are only compared when the inputs agree."""
        h = hashlib.sha256()
        for r in self.requests:
            h.update(json.dumps([r.prompt_token_ids, r.output_len]).encode())
        return h.hexdigest()[:16]

    def summary(self) -> dict[str, object]:
        plens = sorted(len(r.prompt_token_ids) for r in self.requests)
        olens = sorted(r.output_len for r in self.requests)
        return {
            **self.spec.model_dump(),
            "vocab_size": self.vocab_size,
            "fingerprint": self.fingerprint(),
            "total_prompt_tokens": self.total_prompt_tokens,
            "total_output_tokens": self.total_output_tokens,
            "prompt_len_min": plens[0],
            "prompt_len_median": plens[len(plens) // 2],
            "prompt_len_max": plens[-1],
            "output_len_min": olens[0],
            "output_len_median": olens[len(olens) // 2],
            "output_len_max": olens[-1],
            "arrival": "all requests at t=0",
        }


def _token_sampler(rng: random.Random, vocab_size: int, reserved: frozenset[int]):
    """Uniform ids over the vocabulary minus special tokens (a real prompt never contains BOS/EOS mid-text)."""
    if vocab_size - len(reserved) < 2:
        raise ValueError(f"vocabulary of {vocab_size} ids leaves nothing to sample after reserving {sorted(reserved)}")

    def draw(n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            t = rng.randrange(vocab_size)
            if t not in reserved:
                out.append(t)
        return out

    return draw


def build_workload(spec: WorkloadSpec, vocab_size: int, reserved_ids: frozenset[int] = frozenset()) -> Workload:
    """Draw prefix, body lengths, bodies and output lengths from one seeded RNG, in that fixed order."""
    rng = random.Random(spec.seed)
    draw = _token_sampler(rng, vocab_size, reserved_ids)
    prefix = draw(spec.prefix_len)
    mu = math.log(spec.body_median)
    body_lens = [
        min(spec.body_max, max(spec.body_min, round(rng.lognormvariate(mu, spec.body_sigma))))
        for _ in range(spec.num_requests)
    ]
    out_lens = [rng.randint(spec.output_min, spec.output_max) for _ in range(spec.num_requests)]
    requests = tuple(
        BenchRequest(index=i, prompt_token_ids=tuple(prefix + draw(n)), output_len=o)
        for i, (n, o) in enumerate(zip(body_lens, out_lens))
    )
    return Workload(spec=spec, vocab_size=vocab_size, requests=requests)


def warmup_prompts(vocab_size: int, reserved_ids: frozenset[int], n: int = 2, length: int = 24) -> list[list[int]]:
    """Short prompts from a separate RNG stream: they warm kernels without seeding the prefix cache."""
    draw = _token_sampler(random.Random(0xBE7C4), vocab_size, reserved_ids)
    return [draw(length + 3 * i) for i in range(n)]
