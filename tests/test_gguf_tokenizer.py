"""A GGUF file's tokenizer, rebuilt by the engine, gives the ids of the model's own Hugging Face tokenizer, of
transformers' GGUF tokenizer, and (where llama-cpp-python is installed) of llama.cpp itself."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from engine.models.gguf import gguf_tokenizer, read_gguf
from tests.helpers.gguf_files import hf_vocab, write_tokenizer_gguf

pytest.importorskip("gguf")

_CORPUS = [
    "Invoice INV-2024-0042 from Acme Corp dated 2024-03-15, total 1,234.50 EUR (VAT 19%).",
    "Rechnungsnummer 2023/117 — Gesamtbetrag 12.345,67 € fällig am 31. März 2024; Müller & Söhne GmbH",
    "N° de facture F-88 : Total TTC 1 299,00 EUR, l'échéance est dépassée. Factuurnummer 7781, totaal",
    "Bank statement for account DE89 3704 0044 0532 0130 00, closing balance 10,000.00.\n\n  Page 2\tof 3",
    "Don't, I'LL, we've, they're: it's 12345678901 and 3.14159; x=y+z {\"a\": [1, 2]}   end\r\n",
    "naïve café résumé Straße ΑΒΓ δέλτα 東京 株式会社 🙂 emoji and e\u0301 combining",
]
TEXTS = _CORPUS + ["", " ", "   leading spaces", "trailing  ", "\n\n\n", "1 22 333 4444 55555",
                   "<|im_start|>user\nhello<|im_end|>\n", "<s>text</s>", "unseen: Ωmega ß∂ƒ ☃"]
SPECIALS = ["<s>", "</s>", "<|im_start|>", "<|im_end|>"]
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _split(pattern):
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


# The pre-tokenizers of the models these GGUF names stand for, as their tokenizer.json files spell them
# (GPT-2, SmolLM/StarCoder, Llama 3, Qwen2).
SOURCES = {
    "gpt-2": (lambda: pre_tokenizers.ByteLevel(add_prefix_space=False), None, False),
    "smollm": (lambda: pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)]), None, False),
    "llama-bpe": (lambda: _split(_LLAMA3), None, True),
    "qwen2": (lambda: _split(_QWEN2), normalizers.NFC, False),
}


def _train_bpe(pre: str) -> Tokenizer:
    make_pre, make_norm, ignore_merges = SOURCES[pre]
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = make_pre()
    if make_norm is not None:
        tok.normalizer = make_norm()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS * 3, trainer=trainer)
    return tok


@pytest.fixture(scope="module", params=sorted(SOURCES))
def bpe_case(request, tmp_path_factory):
    pre = request.param
    source = _train_bpe(pre)
    raw = json.loads(source.to_str())
    tokens, types = hf_vocab(raw)
    merges = [m if isinstance(m, str) else " ".join(m) for m in raw["model"]["merges"]]
    path = write_tokenizer_gguf(tmp_path_factory.mktemp(f"tok-{pre}") / "tok.gguf", "gpt2", tokens, types,
                                bos=0, eos=1, add_bos=False, pre=pre, merges=merges)
    return pre, source, path, gguf_tokenizer(read_gguf(path))


def _transformers(path):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _llama_cpp(path):
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)


def test_bpe_ids_equal_the_source_tokenizer(bpe_case):
    _, source, _, ours = bpe_case
    for text in TEXTS:
        assert ours.encode(text) == source.encode(text).ids, text
        assert ours.decode(ours.encode(text), skip_special_tokens=False) == source.decode(
            source.encode(text).ids, skip_special_tokens=False)


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_bpe_ids_equal_the_source_tokenizer_on_any_text(bpe_case, text):
    _, source, _, ours = bpe_case
    assert ours.encode(text) == source.encode(text).ids


def test_bpe_ids_equal_transformers_gguf_tokenizer(bpe_case):
    pre, _, path, ours = bpe_case
    if pre == "smollm":
        pytest.skip("transformers maps 'smollm' to plain GPT-2 splitting (no digit split); llama.cpp and SmolLM2's "
                    "own tokenizer.json split digits, which is what the engine follows")
    hf = _transformers(path)
    for text in _without_nfc_changes(pre, TEXTS):
        assert ours.encode(text) == hf(text, add_special_tokens=False)["input_ids"], text


def _without_nfc_changes(pre, texts):
    """Qwen2's tokenizer.json NFC-normalizes first (so does the engine); llama.cpp and transformers' GGUF loader do
    not, so they are compared only on text NFC leaves alone."""
    return [t for t in texts if pre != "qwen2" or unicodedata.normalize("NFC", t) == t]


def test_bpe_ids_equal_llama_cpp(bpe_case):
    pre, _, path, ours = bpe_case
    lc = _llama_cpp(path)
    for text in _without_nfc_changes(pre, TEXTS):
        if text:
            assert ours.encode(text) == lc.tokenize(text.encode(), add_bos=False, special=True), text


# ------------------------------------------------------------------ SentencePiece (tokenizer.ggml.model = llama)

@pytest.fixture(scope="module")
def spm_case(tmp_path_factory):
    """A SentencePiece-style vocabulary: <unk>, control tokens, 256 byte tokens, then pieces best-first."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    tok.train_from_iterator(_CORPUS * 3, trainer=trainers.BpeTrainer(vocab_size=300, show_progress=False))
    pieces = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    pieces = [p for p in pieces if len(p) > 1] + [p for p in pieces if len(p) == 1]  # merges first, like SPM
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + pieces
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    path = write_tokenizer_gguf(tmp_path_factory.mktemp("tok-spm") / "spm.gguf", "llama", tokens, types,
                                bos=1, eos=2, add_bos=True, scores=scores)
    return path, gguf_tokenizer(read_gguf(path))


def test_spm_ids_equal_transformers_gguf_tokenizer(spm_case):
    path, ours = spm_case
    hf = _transformers(path)
    # transformers' Metaspace adds no dummy prefix before text that starts with a space or follows a control token;
    # sentencepiece and llama.cpp do (the next test), and so does the engine. Elsewhere all three agree.
    for text in [t for t in TEXTS if not t.startswith(" ") and "<s>" not in t]:
        assert ours.encode(text) == hf(text)["input_ids"], text
        assert ours.encode(text, add_special_tokens=False) == hf(text, add_special_tokens=False)["input_ids"], text


def test_spm_ids_equal_llama_cpp(spm_case):
    path, ours = spm_case
    lc = _llama_cpp(path)
    for text in TEXTS:
        if text:
            assert ours.encode(text) == lc.tokenize(text.encode(), add_bos=True, special=True), text
