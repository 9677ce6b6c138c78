"""Writes small GGUF files with the `gguf` package the way llama.cpp's converter lays them out (tensor names,
Q/K row permutation for Llama, tokenizer metadata), from the tiny Hugging Face checkpoints of
`tests.helpers.checkpoints`. K-quant types have no quantizer in `gguf`, so their blocks are random bytes with
small scales: the file defines the weights, and both the engine and transformers dequantize the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
# bytes per 256-value block and where its f16 scales sit, for the K-quants built from random bytes.
# (bytes per block, offset of the f16 super-block scale d, of dmin (or None), d's size, dmin/d). The sizes give
# weights with a std near 0.06-0.08, like the float checkpoints; dmin = d times the mean quant centres them.
_KQUANT = {"Q4_K": (144, 0, 2, 2.5e-4, 7.5), "Q5_K": (176, 0, 2, 1.2e-4, 15.5), "Q6_K": (210, 208, None, 5e-5, 0.0)}


def gguf_name(hf: str) -> str:
    if hf in _GLOBAL:
        return _GLOBAL[hf]
    parts = hf.split(".")
    return f"blk.{parts[2]}.{_LAYER['.'.join(parts[3:])]}"


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py's LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _random_kquant(rows: int, cols: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    nbytes, d_at, dmin_at, size, centre = _KQUANT[kind]
    blocks = rng.integers(0, 256, size=(rows * cols // 256, nbytes), dtype=np.uint8)
    d = rng.uniform(0.5 * size, 1.5 * size, size=blocks.shape[0])
    blocks[:, d_at:d_at + 2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    if dmin_at is not None:
        blocks[:, dmin_at:dmin_at + 2] = (d * centre).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, cols // 256 * nbytes)


def _encode(w: np.ndarray, kind: str, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
    import gguf

    qtype = gguf.GGMLQuantizationType[kind]
    if w.ndim == 1 or kind == "F32":
        return w.astype(np.float32), None
    if kind in _KQUANT:
        return _random_kquant(*w.shape, kind, rng), qtype
    return gguf.quants.quantize(w.astype(np.float32), qtype), qtype


def hf_vocab(tokenizer_json: dict[str, Any]) -> tuple[list[str], list[int]]:
    """(tokens by id, llama.cpp token types) of a `tokenizer.json`: added special tokens are CONTROL (3)."""
    tok = tokenizer_json
    vocab = tok["model"]["vocab"]
    added = {t["id"]: t for t in tok.get("added_tokens", [])}
    size = max(list(vocab.values()) + list(added)) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [5] * size  # UNUSED until filled
    for t, i in vocab.items():
        tokens[i], types[i] = t, 1
    for i, t in added.items():
        tokens[i], types[i] = t["content"], 3 if t.get("special") else 4
    return tokens, types


def _add_tokenizer(writer: Any, model_dir: Path, pre: str, chat_template: str | None) -> None:
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    tokens, types = hf_vocab(tok)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    add_tokenizer_metadata(writer, "gpt2", tokens, types, bos=tokens.index(cfg["bos_token"]),
                           eos=tokens.index(cfg["eos_token"]), add_bos=bool(cfg.get("add_bos_token")), pre=pre,
                           merges=merges, chat_template=chat_template)


def add_tokenizer_metadata(writer: Any, model: str, tokens: list[str], types: list[int], *, bos: int, eos: int,
                           add_bos: bool, pre: str | None = None, merges: list[str] | None = None,
                           scores: list[float] | None = None, chat_template: str | None = None,
                           add_space_prefix: bool | None = None) -> None:
    writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if merges is not None:
        writer.add_token_merges(merges)
    if scores is not None:
        writer.add_token_scores(scores)
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(add_bos)
    if add_space_prefix is not None:
        writer.add_add_space_prefix(add_space_prefix)
    if chat_template:
        writer.add_chat_template(chat_template)


def write_tokenizer_gguf(out: Path, model: str, tokens: list[str], types: list[int], **metadata: Any) -> Path:
    """A minimal one-layer Llama GGUF whose point is its tokenizer metadata (see `add_tokenizer_metadata`)."""
    import gguf

    hidden, vocab = 32, len(tokens)
    writer = gguf.GGUFWriter(str(out), "llama")
    for add, value in ((writer.add_block_count, 1), (writer.add_context_length, 256),
                       (writer.add_embedding_length, hidden), (writer.add_feed_forward_length, 64),
                       (writer.add_head_count, 2), (writer.add_head_count_kv, 2),
                       (writer.add_layer_norm_rms_eps, 1e-6), (writer.add_vocab_size, vocab)):
        add(value)
    add_tokenizer_metadata(writer, model, tokens, types, **metadata)
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (vocab, hidden), "output_norm.weight": (hidden,),
              "blk.0.attn_norm.weight": (hidden,), "blk.0.ffn_norm.weight": (hidden,),
              **{f"blk.0.attn_{n}.weight": (hidden, hidden) for n in ("q", "k", "v", "output")},
              "blk.0.ffn_gate.weight": (64, hidden), "blk.0.ffn_up.weight": (64, hidden),
              "blk.0.ffn_down.weight": (hidden, 64)}
    for name, shape in shapes.items():
        writer.add_tensor(name, rng.normal(0, 0.1, size=shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def write_gguf(model_dir: Path, out: Path, kind: str = "F32", *, pre: str = "gpt-2",
               chat_template: str | None = None, seed: int = 0, arch: str | None = None) -> Path:
    """GGUF copy of the tiny HF checkpoint `model_dir` with every 2-D weight stored as `kind`."""
    import gguf

    cfg = json.loads((model_dir / "config.json").read_text())
    arch = arch or {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama",
                    "Qwen2ForCausalLM": "qwen2"}[cfg["architectures"][0]]
    heads, kv_heads = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    rope = cfg.get("rope_parameters") or {}  # transformers 5 writes rope_theta inside rope_parameters
    writer.add_rope_freq_base(float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))))
    writer.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    writer.add_rope_dimension_count(cfg["hidden_size"] // heads)
    writer.add_vocab_size(cfg["vocab_size"])
    writer.add_file_type(0 if kind == "F32" else 1 if kind == "F16" else 32 if kind == "BF16" else 7)
    _add_tokenizer(writer, model_dir, pre, chat_template)
    rng = np.random.default_rng(seed)
    for name, w in load_file(str(model_dir / "model.safetensors")).items():
        if name.endswith("rotary_emb.inv_freq"):
            continue
        if arch == "llama" and "q_proj" in name:
            w = _permute(w, heads)
        elif arch == "llama" and "k_proj" in name:
            w = _permute(w, kv_heads)
        data, qtype = _encode(w, kind, rng)
        if qtype is None:
            writer.add_tensor(gguf_name(name), data)
        else:
            raw = np.ascontiguousarray(data).view(np.uint8).reshape(w.shape[0], -1)  # gguf takes the byte shape
            writer.add_tensor(gguf_name(name), raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
