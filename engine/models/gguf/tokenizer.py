"""The tokenizer a GGUF file describes, rebuilt as a Hugging Face `tokenizers` pipeline.

GGUF stores the vocabulary, merges (BPE) or scores (SentencePiece), token types and a `tokenizer.ggml.pre` name
for the pre-tokenizer; llama.cpp keeps the regex for each name in its own source. We map the names we support to
the `tokenizers` pre-tokenizer the original Hugging Face `tokenizer.json` used, so ids match the model's own
tokenizer (tests compare against it, and against llama.cpp on the real SmolLM2 file). No library does this
conversion without pulling in transformers' model machinery, which the engine does not load at run time.
"""

from __future__ import annotations

from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from engine.errors import ModelLoadError
from engine.models.gguf.reader import GGUFFile
from engine.tokenizer import Tokenizer as EngineTokenizer

# llama.cpp token types (llama_token_type).
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6

_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _split_then_bytes(pattern: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def _byte_level() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def _digits_then_bytes() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _byte_level()])


# tokenizer.ggml.pre -> (pre-tokenizer, normalizer, BPE ignore_merges), as in the models' own tokenizer.json.
_BPE_PRE: dict[str, tuple[Any, Any, bool]] = {
    "default": (_byte_level, None, False),
    "gpt-2": (_byte_level, None, False),
    "smollm": (_digits_then_bytes, None, False),
    "starcoder": (_digits_then_bytes, None, False),
    "llama-bpe": (lambda: _split_then_bytes(_LLAMA3_SPLIT), None, True),
    "llama3": (lambda: _split_then_bytes(_LLAMA3_SPLIT), None, True),
    "qwen2": (lambda: _split_then_bytes(_QWEN2_SPLIT), normalizers.NFC, False),
    "deepseek-r1-qwen": (lambda: _split_then_bytes(_QWEN2_SPLIT), normalizers.NFC, False),
}


def _bpe(f: GGUFFile, tokens: list[str]) -> Tokenizer:
    pre = f.metadata.get("tokenizer.ggml.pre", "default")
    if pre not in _BPE_PRE:
        raise ModelLoadError(f"{f.path}: GGUF pre-tokenizer {pre!r} is not supported; supported: "
                             f"{', '.join(sorted(_BPE_PRE))}")
    merges = f.metadata.get("tokenizer.ggml.merges")
    if not merges:
        raise ModelLoadError(f"{f.path}: a BPE (gpt2) vocabulary without tokenizer.ggml.merges")
    make_pre, make_norm, ignore_merges = _BPE_PRE[pre]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab, pairs, ignore_merges=ignore_merges))
    tok.pre_tokenizer = make_pre()
    if make_norm is not None:
        tok.normalizer = make_norm()
    tok.decoder = decoders.ByteLevel()
    return tok


def _spm_merges(tokens: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """SentencePiece BPE merges the pair whose joined piece scores highest; as ranked BPE merges that is every
    split of a piece into two pieces of the vocabulary, ordered by the joined piece's score."""
    ids = {t: i for i, t in enumerate(tokens) if types[i] in (_NORMAL, _USER_DEFINED)}
    ranked = []
    for piece, pid in ids.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in ids and right in ids:
                ranked.append((-scores[pid], ids[left], ids[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _spm(f: GGUFFile, tokens: list[str], types: list[int]) -> Tokenizer:
    scores = f.metadata.get("tokenizer.ggml.scores")
    if not scores or len(scores) != len(tokens):
        raise ModelLoadError(f"{f.path}: a SentencePiece (llama) vocabulary needs one score per token")
    unk_id = f.metadata.get("tokenizer.ggml.unknown_token_id")
    unk = tokens[unk_id] if unk_id is not None else None
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, _spm_merges(tokens, scores, types), unk_token=unk, fuse_unk=True,
                               byte_fallback=True))
    # sentencepiece's dummy prefix: always one "▁" before the text, even text that starts with a space (as
    # llama.cpp does; a Metaspace pre-tokenizer would skip it there).
    prefix = bool(f.metadata.get("tokenizer.ggml.add_space_prefix", True))
    steps = [normalizers.Prepend("▁")] if prefix else []
    tok.normalizer = normalizers.Sequence(steps + [normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
                                    + ([decoders.Strip(content=" ", left=1, right=0)] if prefix else []))
    return tok


def _special(f: GGUFFile, tokens: list[str], key: str) -> str | None:
    idx = f.metadata.get(f"tokenizer.ggml.{key}_token_id")
    return tokens[idx] if idx is not None and 0 <= idx < len(tokens) else None


def gguf_tokenizer(f: GGUFFile) -> EngineTokenizer:
    kind = f.metadata.get("tokenizer.ggml.model")
    tokens = f.metadata.get("tokenizer.ggml.tokens")
    if not tokens:
        raise ModelLoadError(f"{f.path}: GGUF file has no tokenizer vocabulary (tokenizer.ggml.tokens)")
    types = list(f.metadata.get("tokenizer.ggml.token_type") or [_NORMAL] * len(tokens))
    if kind == "gpt2":
        tok, add_bos_default = _bpe(f, tokens), False
    elif kind == "llama":
        tok, add_bos_default = _spm(f, tokens, types), True
    else:
        raise ModelLoadError(f"{f.path}: GGUF tokenizer model {kind!r} is not supported; supported: gpt2, llama")
    # Control tokens (<|im_start|>, <s>) are matched whole and are special (skipped when decoding); user-defined
    # ones are matched whole too, as llama.cpp does.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == _CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == _USER_DEFINED])
    bos, eos = _special(f, tokens, "bos"), _special(f, tokens, "eos")
    add_bos = bool(f.metadata.get("tokenizer.ggml.add_bos_token", add_bos_default)) and bos is not None
    add_eos = bool(f.metadata.get("tokenizer.ggml.add_eos_token", False)) and eos is not None
    single = " ".join(([f"{bos}:0"] if add_bos else []) + ["$A:0"] + ([f"{eos}:0"] if add_eos else []))
    if add_bos or add_eos:
        specials = {(bos, f.metadata["tokenizer.ggml.bos_token_id"])} if add_bos else set()
        specials |= {(eos, f.metadata["tokenizer.ggml.eos_token_id"])} if add_eos else set()
        tok.post_processor = processors.TemplateProcessing(single=single, special_tokens=sorted(specials))
    config = {"bos_token": bos, "eos_token": eos, "unk_token": _special(f, tokens, "unknown"),
              "pad_token": _special(f, tokens, "padding"), "add_bos_token": add_bos,
              "chat_template": f.metadata.get("tokenizer.chat_template")}
    return EngineTokenizer(tok, config, source=str(f.path))
