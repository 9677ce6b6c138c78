"""Build a training/dev corpus of (prompt, answer) pairs from freshly generated documents and windows.

Documents go through the real path: fpdf2 PDF -> pypdf -> pipeline.ingest.pdf_text -> pipeline.plan.prompts.
Windows go canonical transactions -> pipeline.plan.windows (polars) -> pipeline.plan.prompts.

    python data/tools/build_dataset.py --seed 1 --docs 6000 --accounts 900 --out data/build/train.jsonl
"""

import argparse
import io
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pypdf import PdfReader  # noqa: E402

from data.tools import docs, transactions  # noqa: E402
from pipeline.ingest.pdf_text import document_text, page_texts  # noqa: E402
from pipeline.plan.prompts import render_document_prompt, render_window_prompt  # noqa: E402
from pipeline.plan.windows import reference_summary, window_facts  # noqa: E402
from schemas import DocumentExtraction, to_compact_json  # noqa: E402

DOC_TYPES = tuple(docs.BUILDERS)


def make_doc(rng: random.Random, doc_type: str, long: bool = False) -> docs.Doc:
    if doc_type == "bank_statement":
        return docs.bank_statement(rng, long=long)
    return docs.BUILDERS[doc_type](rng)


def doc_example(doc: docs.Doc) -> dict[str, object]:
    text = document_text(page_texts(PdfReader(io.BytesIO(doc.pdf))))
    answer = to_compact_json(DocumentExtraction.model_validate(doc.gold))
    return {"kind": "doc", "doc_type": doc.doc_type, "prompt": render_document_prompt(text), "answer": answer}


def window_examples(rng: random.Random, accounts: int) -> list[dict[str, object]]:
    txs: list[transactions.Tx] = []
    for _ in range(accounts):
        txs += transactions.account_transactions(rng)
    out = []
    for facts in window_facts(transactions.to_table(txs)):
        out.append({"kind": "window", "prompt": render_window_prompt(facts),
                    "answer": to_compact_json(reference_summary(facts))})
    return out


def build(seed: int, n_docs: int, n_accounts: int, long_frac: float = 0.03) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n_docs):
        doc_type = DOC_TYPES[i % len(DOC_TYPES)]
        long = doc_type == "bank_statement" and rng.random() < long_frac * len(DOC_TYPES)
        rows.append(doc_example(make_doc(rng, doc_type, long)))
    rows += window_examples(rng, n_accounts)
    random.Random(seed + 1).shuffle(rows)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--docs", type=int, default=6000)
    ap.add_argument("--accounts", type=int, default=900)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = build(args.seed, args.docs, args.accounts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} examples to {args.out}")


if __name__ == "__main__":
    main()
