"""Model shapes for the benchmark, materialised as random-weight HF checkpoints (safetensors + config + tokenizer).

Speed depends on shape, not on weight values, so random weights give honest throughput numbers without a download.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from engine import export_hf_checkpoint

# Bump when the on-disk layout of a built shape changes, so stale caches are rebuilt rather than trusted.
_BUILD_VERSION = 1
_UNK, _BOS, _EOS = 0, 1, 2


@dataclass(frozen=True)
class ModelShape:
    """The dimensions that decide cost (FLOPs, bytes) of a decoder-only transformer."""

    name: str
    arch: str  # "llama" | "qwen2" | other HF model_type (real checkpoints)
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    head_dim: int
    tie_word_embeddings: bool
    rope_theta: float = 10000.0
    qkv_bias: bool = False
    max_position_embeddings: int = 8192

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def num_params(self) -> int:
        """Parameter count of the shape (norm weights and biases included; tied embeddings counted once)."""
        h, hd = self.hidden_size, self.head_dim
        q, kv = self.num_heads * hd, self.num_kv_heads * hd
        attn = h * q + 2 * h * kv + q * h + ((q + 2 * kv) if self.qkv_bias else 0)
        mlp = 3 * h * self.intermediate_size
        per_layer = attn + mlp + 2 * h
        emb = self.vocab_size * h
        return self.num_layers * per_layer + emb * (1 if self.tie_word_embeddings else 2) + h


def _shape(name: str, arch: str, h: int, layers: int, heads: int, kv: int, inter: int, vocab: int, **kw: Any) -> ModelShape:
    return ModelShape(name, arch, h, layers, heads, kv, inter, vocab, h // heads, **kw)


SHAPES: dict[str, ModelShape] = {
    s.name: s
    for s in (
        _shape("smollm2-135m", "llama", 576, 30, 9, 3, 1536, 49152, tie_word_embeddings=True, rope_theta=100000.0),
        _shape(
            "qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936,
            tie_word_embeddings=True, rope_theta=1000000.0, qkv_bias=True, max_position_embeddings=32768,
        ),
        # Small enough that the CI smoke run, HF baselines included, takes seconds on two cores.
        _shape("tiny-llama", "llama", 128, 4, 4, 2, 256, 2048, tie_word_embeddings=True, max_position_embeddings=2048),
    )
}


def reserved_token_ids(model_dir: Path) -> frozenset[int]:
    """Special ids named in the checkpoint's config files; prompts avoid them."""
    ids: set[int] = set()
    for fname in ("config.json", "generation_config.json"):
        p = model_dir / fname
        if not p.exists():
            continue
        cfg = json.loads(p.read_text())
        for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
            v = cfg.get(key)
            if isinstance(v, int):
                ids.add(v)
            elif isinstance(v, list):
                ids.update(x for x in v if isinstance(x, int))
    return frozenset(ids)


def shape_from_checkpoint(model_dir: Path) -> ModelShape:
    """Read the cost-relevant dimensions of a real HF checkpoint from its config.json."""
    cfg_path = Path(model_dir) / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path} not found: --model must be a shape name ({', '.join(SHAPES)}) or a HF checkpoint dir")
    cfg = json.loads(cfg_path.read_text())
    cfg = cfg.get("text_config", cfg)
    try:
        h, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        return ModelShape(
            name=Path(model_dir).name,
            arch=str(cfg.get("model_type", "unknown")),
            hidden_size=h,
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            intermediate_size=int(cfg["intermediate_size"]),
            vocab_size=int(cfg["vocab_size"]),
            head_dim=int(cfg.get("head_dim") or h // heads),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            rope_theta=float(cfg.get("rope_theta", 10000.0)),
            qkv_bias=bool(cfg.get("attention_bias", cfg.get("model_type") == "qwen2")),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 8192)),
        )
    except KeyError as e:
        raise ValueError(f"{cfg_path} lacks {e.args[0]!r}; cannot size the model for FLOPs") from e


def _hf_config(shape: ModelShape) -> Any:
    # lazy: heavy, and only the HF baselines and loading checks need it
    import transformers

    common = dict(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        intermediate_size=shape.intermediate_size,
        max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=1e-5,
        tie_word_embeddings=shape.tie_word_embeddings,
        rope_theta=shape.rope_theta,
        bos_token_id=_BOS,
        eos_token_id=_EOS,
    )
    if shape.arch == "llama":
        return transformers.LlamaConfig(**common, attention_bias=shape.qkv_bias, mlp_bias=False)
    if shape.arch == "qwen2":
        return transformers.Qwen2Config(**common, use_sliding_window=False)
    raise ValueError(f"cannot build random weights for arch {shape.arch!r}")


def _write_tokenizer(path: Path, vocab_size: int, max_len: int) -> None:
    """A word-level tokenizer with one token per id: the benchmark feeds token ids, but loaders expect the file."""
    # lazy: only HF tokenizer files need it
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {f"t{i}": i for i in range(vocab_size)}
    for name, i in (("<unk>", _UNK), ("<s>", _BOS), ("</s>", _EOS)):
        del vocab[f"t{i}"]
        vocab[name] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", _BOS)])
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "add_bos_token": True,
                "model_max_length": max_len,
            }
        )
    )


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "finllm" / "bench-shapes"


def _build_once(final: Path, build: Callable[[Path], None]) -> Path:
    """`final`, built by `build(empty_dir)` in a temporary sibling and renamed into place once complete, so an
    interrupted build never leaves a directory that looks finished; later calls reuse it."""
    if (final / ".complete").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        build(tmp)
        (tmp / ".complete").write_text("ok\n")
        if final.exists():  # an incomplete leftover from an interrupted build
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def build_checkpoint(shape: ModelShape, cache_dir: Path | None = None, seed: int = 0, dtype: str = "bfloat16") -> Path:
    """Build (once) and return a random-weight checkpoint of `shape`; later calls reuse the finished directory."""

    def build(out: Path) -> None:
        # lazy: heavy: loaded where a model runs
        import torch
        # lazy: heavy, and only the HF baselines and loading checks need it
        import transformers

        config = _hf_config(shape)
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        model.save_pretrained(out, safe_serialization=True)
        (out / "generation_config.json").write_text(
            json.dumps({"bos_token_id": _BOS, "eos_token_id": _EOS, "do_sample": False})
        )
        _write_tokenizer(out, shape.vocab_size, shape.max_position_embeddings)
        (out / "bench_shape.json").write_text(json.dumps(shape.to_dict(), indent=1))

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return _build_once(root / f"{shape.name}-seed{seed}-{dtype}-v{_BUILD_VERSION}", build)


def exported_checkpoint(gguf: Path, cache_dir: Path | None, dtype: str) -> Path:
    """A GGUF file as a Hugging Face directory in `dtype` (exported once, cached by the file's name, size and
    mtime), so the HF baselines and the engine run the very same dequantized weights."""

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    st = gguf.stat()

    def build(out: Path) -> None:
        export_hf_checkpoint(gguf, out, dtype=dtype)

    return _build_once(root / f"{gguf.stem}-{st.st_size}-{st.st_mtime_ns}-{dtype}-export", build)


def resolve_model(model: str, cache_dir: Path | None, seed: int, dtype: str) -> tuple[Path, ModelShape, bool]:
    """Map --model to (checkpoint dir, shape, is_random_weights): a shape name, a HF directory, a .gguf file or a
    registered model name (`pipeline models list`)."""
    if model in SHAPES:
        shape = SHAPES[model]
        return build_checkpoint(shape, cache_dir, seed, dtype), shape, True
    from pipeline.models import resolve_model as resolve_real  # noqa: PLC0415

    try:
        path = resolve_real(model)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"--model {model!r}: not a known shape ({', '.join(SHAPES)}); {exc}") from exc
    if path.is_file():
        path = exported_checkpoint(path, cache_dir, dtype)
    return path.resolve(), replace(shape_from_checkpoint(path), name=Path(model).name), False
