"""RoPE scaling as the checkpoint's config asks (YaRN, linear, Llama 3): a long-context model reads positions past
its pretraining length exactly as Hugging Face transformers does (greedy tokens equal in float32)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from engine import LLM, SamplingParams
from engine.errors import ModelLoadError
from tests.helpers.checkpoints import make_checkpoint
from tests.helpers.hf_reference import hf_greedy

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


@pytest.mark.parametrize("scaling", [YARN, {**YARN, "beta_fast": 16, "beta_slow": 2, "attention_factor": 1.2},
                                     {"rope_type": "linear", "factor": 2.0}])
def test_scaled_rope_matches_hf_past_the_pretraining_length(tmp_path: Path, scaling: dict) -> None:
    ckpt = make_checkpoint(tmp_path / "m", "qwen2", max_position_embeddings=256, overrides={"rope_scaling": scaling})
    rng = random.Random(3)
    prompts = [[0] + [rng.randrange(2, 384) for _ in range(n - 1)] for n in (20, 90, 150)]  # past 64 positions
    refs = [hf_greedy(ckpt, p, 16, ignore_eos=True) for p in prompts]
    llm = LLM(ckpt, dtype="float32", block_size=8, max_num_batched_tokens=64)
    outs = llm.generate(prompts, SamplingParams(max_tokens=16, ignore_eos=True), progress=False)
    assert [o.outputs[0].token_ids for o in outs] == refs


def test_yarn_tables_equal_transformers() -> None:
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from engine.models.rotary import rope_parameters

    hf = transformers.Qwen2Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                  max_position_embeddings=256, rope_theta=1e6, rope_scaling=dict(YARN))
    inv_ref, factor_ref = ROPE_INIT_FUNCTIONS["yarn"](hf, torch.device("cpu"))
    ours = SimpleConfig(head_dim=16, rope_theta=1e6, rope_scaling=dict(YARN), max_position_embeddings=256)
    inv, factor = rope_parameters(ours)  # type: ignore[arg-type]
    assert torch.equal(inv, inv_ref.float()) and factor == pytest.approx(factor_ref)


class SimpleConfig:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


def test_unsupported_scaling_is_a_clear_error(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "m", "qwen2", overrides={"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    with pytest.raises(ModelLoadError, match="dynamic"):
        LLM(ckpt, dtype="float32")
