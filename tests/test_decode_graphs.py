"""The decode-graph path (engine/decode_graphs.py) and the step's host/device traffic.

CUDA graph capture needs a GPU; what can go wrong around it — staging rows into static buffers, padding a step to
its bucket, reading attention sized for the longest row, taking the first rows of the static logits — runs the
same with `capture=False`, which these tests use on CPU: greedy tokens must equal the eager engine's exactly.
"""

from __future__ import annotations

import importlib.util
import os
import random
from pathlib import Path

import pytest
import torch

from engine import LLM, SamplingParams
from engine.decode_graphs import PAD_SLOT, DecodeGraphs, bucket_sizes

HAS_TRITON = importlib.util.find_spec("triton") is not None
if HAS_TRITON and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

REPO = Path(__file__).resolve().parents[1]


def _prompts(seed: int, lengths: tuple[int, ...]) -> list[list[int]]:
    rng = random.Random(seed)
    return [[0] + [rng.randrange(2, 384) for _ in range(n)] for n in lengths]


def _generate(llm: LLM, prompts: list[list[int]], params: SamplingParams) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)]


def test_buckets_cover_every_batch_size_with_little_padding():
    assert bucket_sizes(1) == [1]
    assert bucket_sizes(6) == [1, 2, 4, 6]
    assert bucket_sizes(20) == [1, 2, 4, 8, 16, 20]
    sizes = bucket_sizes(128)
    assert sizes[-1] == 128 and len(sizes) == 3 + 16
    g = DecodeGraphs(lambda *a: a[0], device=torch.device("cpu"), max_rows=20, max_blocks=4, block_size=8,
                     window=None, capture=False)
    assert [g.bucket(n) for n in (0, 1, 3, 5, 9, 16, 17, 20, 21)] == [None, 1, 4, 8, 16, 16, 20, 20, None]
    with pytest.raises(ValueError, match="CUDA"):
        DecodeGraphs(lambda *a: a[0], device=torch.device("cpu"), max_rows=4, max_blocks=4, block_size=8,
                     window=None, capture=True)


def test_staging_pads_rows_to_the_bucket_with_null_block_rows():
    g = DecodeGraphs(lambda *a: a[0], device=torch.device("cpu"), max_rows=16, max_blocks=4, block_size=8,
                     window=None, capture=False)
    g.buf["ids"].fill_(7)  # stale values from an earlier, bigger step
    size = g.stage_rows([5, 6, 9], [3, 10, 17], [43, 66, 97], [4, 11, 18], [[5], [8, 9], [11, 12, 13]])
    assert size == 4
    assert g.buf["ids"][:4].tolist() == [5, 6, 9, 0]
    assert g.buf["pos"][:4].tolist() == [3, 10, 17, 0]
    assert g.buf["slots"][:4].tolist() == [43, 66, 97, PAD_SLOT]
    assert g.buf["lens"][:4].tolist() == [4, 11, 18, 1]
    assert g.buf["table"][:4, :3].tolist() == [[5, 0, 0], [8, 9, 0], [11, 12, 13], [0, 0, 0]]
    assert not g.fits([[1, 2, 3, 4, 5]])


@pytest.mark.parametrize("case", ["native", "reference", "int8-kv", "speculative"])
def test_decode_graph_path_gives_the_eager_tokens(checkpoints, case):
    """Prompts of different lengths finish at different steps, so decode batches shrink through several buckets
    (5 rows -> bucket 8, 4, 2, 1); chunked prefill steps stay eager. Tokens equal the eager engine's."""
    arch = "qwen2" if case == "int8-kv" else "llama"
    kwargs: dict = dict(dtype="float32", block_size=8, max_num_batched_tokens=64, max_num_seqs=8,
                        max_model_len=160)
    if case == "reference":
        kwargs["kernels"] = "reference"  # gathers padded blocks: the padding rows' null-block K/V must stay masked
    if case == "int8-kv":
        kwargs["kv_cache_dtype"] = "int8"
    if case == "speculative":
        kwargs["speculative_config"] = {"method": "ngram", "num_speculative_tokens": 3}
    prompts = _prompts(5, (3, 17, 30, 9, 44))
    prompts[1] = prompts[1] + prompts[1][1:]  # a repeat for the n-gram drafter to find
    outs = [SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True) for n in (12, 7, 20, 3, 15)]
    want = [_generate(LLM(checkpoints[arch], **kwargs), [p], o)[0] for p, o in zip(prompts, outs)]

    llm = LLM(checkpoints[arch], **kwargs)
    runner = llm._core.runner
    runner.enable_decode_graphs(8, capture=False)
    got = [o.outputs[0].token_ids for o in llm.generate(prompts, outs, progress=False)]
    assert got == want
    assert llm.stats()["graph_steps"] >= 10
    assert llm.stats()["graph_steps"] < llm.stats()["steps"]  # prefill steps stayed eager


def test_sliding_window_rows_through_the_graph_path(tmp_path):
    from tests.helpers.checkpoints import make_checkpoint

    ckpt = make_checkpoint(tmp_path / "mistral-window", "mistral", overrides={"sliding_window": 12})
    kwargs: dict = dict(dtype="float32", block_size=4, max_num_batched_tokens=64, max_model_len=96)
    prompts = _prompts(9, (5, 21, 30))
    params = SamplingParams(max_tokens=16, min_tokens=16, ignore_eos=True)
    want = _generate(LLM(ckpt, **kwargs), prompts, params)
    llm = LLM(ckpt, **kwargs)
    llm._core.runner.enable_decode_graphs(4, capture=False)
    assert _generate(llm, prompts, params) == want
    assert llm.stats()["graph_steps"] > 0


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_decode_steps_read_nothing_back_but_the_sampled_tokens(checkpoints, monkeypatch):
    """What CUDA runs: every op on the Triton kernels (here in the interpreter) with the decode-graph path. A
    decode step must not read device values back in engine or kernel code (a sync on a GPU, and an error under
    graph capture) except once, for the sampled tokens; its tokens equal the reference kernels'."""
    kwargs: dict = dict(dtype="float32", block_size=8, max_num_batched_tokens=32, max_model_len=96)
    prompts = _prompts(11, (6, 21))
    params = SamplingParams(max_tokens=5, min_tokens=5, ignore_eos=True)
    want = _generate(LLM(checkpoints["llama"], kernels="reference", **kwargs), prompts, params)

    llm = LLM(checkpoints["llama"], kernels="triton", **kwargs)
    llm._core.runner.enable_decode_graphs(4, capture=False)
    reads: list[str] = []
    ours = (str(REPO / "engine"), str(REPO / "kernels"))

    def counting(name):
        original = getattr(torch.Tensor, name)

        def read(self, *args, **kw):
            import sys

            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(ours):
                reads.append(f"{name} in {caller}:{sys._getframe(1).f_lineno}")
            return original(self, *args, **kw)

        return read

    steps: list[tuple[int, list[str]]] = []
    original_step = llm._core.step

    def step():
        reads.clear()
        out = original_step()
        steps.append((llm._core.runner.graphs.replays, list(reads)))
        return out

    for name in ("tolist", "item", "__int__", "__float__", "__bool__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, counting(name))
    monkeypatch.setattr(llm._core, "step", step)
    got = _generate(llm, prompts, params)
    monkeypatch.undo()
    assert got == want
    graph_steps = [r for (replays, r), (before, _) in zip(steps[1:], steps) if replays > before]
    assert len(graph_steps) >= 3
    for r in graph_steps:
        assert len(r) == 1 and r[0].startswith("tolist in") and r[0].split(" in ")[1].startswith(
            str(REPO / "engine" / "sampler.py")), r
