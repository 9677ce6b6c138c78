"""Tiny random Hugging Face checkpoints built in temp dirs, so tests never touch a model hub."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

_CORPUS = [
    "Invoice INV-2024-0042 from Acme Corp dated 2024-03-15, total 1234.50 EUR.",
    "Bank statement for account DE89 3704 0044 0532 0130 00, closing balance 10,000.00.",
    "Trade confirmation: bought 100 shares of XYZ at 12.34 USD on 2023-11-02.",
    "KYC notice: the customer must provide a valid passport before 2025-01-31.",
    "Research note: revenue grew 12% year over year; margin 23.4%.",
    "The quick brown fox jumps over the lazy dog. {\"a\":1,\"b\":[true,false,null]}",
]


def build_tokenizer(path: Path, vocab_size: int = 320) -> Any:
    """Train a small byte-level BPE (BOS prepended by the post-processor) and save tokenizer files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True, "model_max_length": 4096})
    )
    return tok


_ARCHS: dict[str, dict[str, Any]] = {
    "llama": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
    },
    "mistral": {
        "architectures": ["MistralForCausalLM"],
        "model_type": "mistral",
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "rope_theta": 10000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
    },
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
        "use_sliding_window": False,
    },
}


def make_checkpoint(
    path: Path,
    arch: str = "llama",
    *,
    vocab_size: int = 384,
    hidden_size: int = 64,
    num_layers: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 512,
    seed: int = 0,
    tokenizer: bool = True,
    shard: bool = False,
    overrides: dict[str, Any] | None = None,
) -> Path:
    """Save a random-initialised HF model of `arch` (llama/mistral/qwen2) as safetensors at `path`."""
    import transformers

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg_dict: dict[str, Any] = dict(_ARCHS[arch])
    cfg_dict.update(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        rms_norm_eps=1e-6,
        bos_token_id=0,
        eos_token_id=1,
        torch_dtype="float32",
    )
    cfg_dict.update(overrides or {})
    config_cls = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig, "qwen2": transformers.Qwen2Config}[arch]
    model_cls = {
        "llama": transformers.LlamaForCausalLM,
        "mistral": transformers.MistralForCausalLM,
        "qwen2": transformers.Qwen2ForCausalLM,
    }[arch]
    config = config_cls(**{k: v for k, v in cfg_dict.items() if k not in ("architectures", "model_type")})
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32)
    with torch.no_grad():
        # Larger-than-default init makes logits well separated, so greedy parity is not decided by float noise.
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.08)
            elif "bias" in name:
                p.normal_(0.0, 0.05)
    model.save_pretrained(path, safe_serialization=True, max_shard_size="50KB" if shard else "10GB")
    (path / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": [1], "do_sample": False}))
    if tokenizer:
        build_tokenizer(path)
    return path
