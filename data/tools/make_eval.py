"""Generate the held-out gold set in data/eval (seed 2; training uses seeds 1 and 5).

    python data/tools/make_eval.py --out data/eval --docs 250 --accounts 30

Writes docs/*.pdf + documents.jsonl (gold per document; image-only scans are marked
needs_ocr and excluded from accuracy) and transactions.parquet (canonical table) +
windows.jsonl (facts and gold summary per account window).
"""

import argparse
import io
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow.parquet as pq  # noqa: E402
from pypdf import PdfReader  # noqa: E402

from data.tools import docs, transactions  # noqa: E402
from data.tools.build_dataset import DOC_TYPES, make_doc  # noqa: E402
from pipeline.ingest.pdf_text import document_text, page_texts  # noqa: E402
from pipeline.plan.windows import reference_summary, window_facts  # noqa: E402
from schemas import DocumentExtraction, to_compact_json  # noqa: E402

EVAL_SEED = 2


def write_documents(out: Path, n_docs: int, n_scans: int, rng: random.Random) -> int:
    (out / "docs").mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(n_docs):
        doc_type = DOC_TYPES[i % len(DOC_TYPES)]
        long = doc_type == "bank_statement" and rng.random() < 0.15
        d = make_doc(rng, doc_type, long)
        records.append((d, False))
    for i in range(n_scans):
        d = make_doc(rng, DOC_TYPES[i % len(DOC_TYPES)])
        text = document_text(page_texts(PdfReader(io.BytesIO(d.pdf))))
        records.append((docs.image_only(rng, text, d.gold, d.doc_type), True))
    with (out / "documents.jsonl").open("w", encoding="utf-8") as fh:
        for i, (d, scan) in enumerate(records):
            name = f"docs/{i:04d}_{d.doc_type}{'_scan' if scan else ''}.pdf"
            (out / name).write_bytes(d.pdf)
            gold = json.loads(to_compact_json(DocumentExtraction.model_validate(d.gold)))
            fh.write(json.dumps({"id": f"doc-{i:04d}", "file": name, "doc_type": d.doc_type,
                                 "needs_ocr": scan, "gold": gold}, ensure_ascii=False) + "\n")
    return len(records)


def write_windows(out: Path, n_accounts: int, rng: random.Random) -> int:
    txs: list[transactions.Tx] = []
    for _ in range(n_accounts):
        txs += transactions.account_transactions(rng, months=rng.randint(1, 3))
    table = transactions.to_table(txs, source_file="eval/transactions")
    pq.write_table(table, out / "transactions.parquet", compression="zstd")
    facts = window_facts(table)
    with (out / "windows.jsonl").open("w", encoding="utf-8") as fh:
        for f in facts:
            gold = json.loads(to_compact_json(reference_summary(f)))
            fh.write(json.dumps({"id": f"win-{f['account']}-{f['period_start']}", "facts": f, "gold": gold},
                                ensure_ascii=False) + "\n")
    return len(facts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/eval"))
    ap.add_argument("--docs", type=int, default=250)
    ap.add_argument("--scans", type=int, default=5)
    ap.add_argument("--accounts", type=int, default=30)
    ap.add_argument("--seed", type=int, default=EVAL_SEED)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    n_docs = write_documents(args.out, args.docs, args.scans, rng)
    n_win = write_windows(args.out, args.accounts, rng)
    print(f"{n_docs} documents ({args.scans} scans) and {n_win} windows -> {args.out}")


if __name__ == "__main__":
    main()
