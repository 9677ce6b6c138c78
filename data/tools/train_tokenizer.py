"""Train the demo model's byte-level BPE tokenizer on the training corpus.

Digits are split into single tokens and spaces are isolated (copying numbers digit by
digit and words token by token is what the model must learn); <s> is added by the post-processor, so `Tokenizer.encode(prompt).ids` is exactly
what both training and the pipeline feed the model.

    python data/tools/train_tokenizer.py --corpus data/build/train.jsonl --out data/models/finextract-3m
"""

import argparse
import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS, EOS, PAD = "<s>", "</s>", "<pad>"


def train(texts: list[str], vocab_size: int = 2048) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    # Spaces become their own tokens, so a word has the same ids in the document and inside a
    # JSON string value (after a quote): copying is then a pure token-sequence copy.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(" ", behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2, show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos_id)])
    return tok


def write_hf_files(tok: Tokenizer, out: Path, model_max_length: int) -> None:
    """tokenizer.json plus the tokenizer_config.json transformers needs to load it."""
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS, "eos_token": EOS, "pad_token": PAD,
        "add_bos_token": False, "add_eos_token": False,
        "model_max_length": model_max_length, "clean_up_tokenization_spaces": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--max-len", type=int, default=2048)
    args = ap.parse_args()
    texts = []
    for line in args.corpus.open(encoding="utf-8"):
        row = json.loads(line)
        texts.append(row["prompt"] + row["answer"])
    tok = train(texts, args.vocab)
    write_hf_files(tok, args.out, args.max_len)
    print(f"vocab {tok.get_vocab_size()} -> {args.out}")


if __name__ == "__main__":
    main()
