"""Generate data/samples: a few PDFs and transaction logs for `pipeline run --input data/samples`.

    python data/tools/make_samples.py --out data/samples --manifest data/samples_manifest.json

PDFs: one per document type (the statement spans two pages), one image-only scan (needs OCR)
and one truncated PDF (must become an error row). Logs: a `,` CSV, a `;` decimal-comma CSV,
a latin-1 CSV with debit/credit columns and a JSONL file, with a few deliberately bad rows.
The manifest (kept outside the input folder) lists golds, expected good rows and bad rows.
"""

import argparse
import io
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pypdf import PdfReader  # noqa: E402

from data.tools import docs, transactions, txlogs  # noqa: E402
from pipeline.ingest.pdf_text import document_text, page_texts  # noqa: E402
from schemas import DocumentExtraction, to_compact_json  # noqa: E402

SAMPLES_SEED = 3


def _gold(d: docs.Doc) -> dict[str, object]:
    return json.loads(to_compact_json(DocumentExtraction.model_validate(d.gold)))


def write_pdfs(out: Path, rng: random.Random) -> dict[str, dict[str, object]]:
    entries: dict[str, dict[str, object]] = {}
    for doc_type, builder in docs.BUILDERS.items():
        if doc_type == "bank_statement":
            d = docs.bank_statement(rng, long=True)
            while d.notes.get("pages") != 2:
                d = docs.bank_statement(rng, long=True)
            name = "bank_statement_2_pages.pdf"
        else:
            d = builder(rng)
            name = f"{doc_type}.pdf"
        (out / name).write_bytes(d.pdf)
        entries[name] = {"kind": "pdf", "doc_type": doc_type, "needs_ocr": False, "gold": _gold(d)}
    scan_src = docs.invoice(rng)
    text = document_text(page_texts(PdfReader(io.BytesIO(scan_src.pdf))))
    scan = docs.image_only(rng, text, scan_src.gold, "invoice")
    (out / "scanned_invoice.pdf").write_bytes(scan.pdf)
    entries["scanned_invoice.pdf"] = {"kind": "pdf", "doc_type": "invoice", "needs_ocr": True, "gold": _gold(scan)}
    broken = docs.kyc_notice(rng).pdf
    (out / "truncated.pdf").write_bytes(broken[: len(broken) // 2])
    entries["truncated.pdf"] = {"kind": "pdf", "error": "truncated PDF (first half of the file)"}
    return entries


def write_logs(out: Path, rng: random.Random) -> dict[str, dict[str, object]]:
    entries: dict[str, dict[str, object]] = {}
    plans = [
        ("transactions_comma.csv", "comma", {5: "12O.50"}),
        ("transactions_semicolon_de.csv", "semicolon_de", {9: "n/a"}),
        ("transactions_latin1.csv", "latin1", {}),
        ("transactions.jsonl", "jsonl", {3: '{"account": "broken record"'}),
    ]
    for name, layout, bad in plans:
        txs: list[transactions.Tx] = []
        for _ in range(2 if layout != "latin1" else 1):
            txs += transactions.account_transactions(rng, months=2)
        txs.sort(key=lambda t: (t.account, t.timestamp))
        if layout == "jsonl":
            rows = txlogs.write_jsonl(out / name, txs, bad)
        else:
            rows = txlogs.write_csv(out / name, txs, txlogs.LAYOUTS[layout], bad)
        entries[name] = {
            "kind": "transactions", "layout": layout,
            "good_rows": len(txs) - len(bad), "bad_rows": sorted(rows[i] for i in bad),
            "accounts": sorted({t.account for t in txs}),
        }
    return entries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/samples"))
    ap.add_argument("--manifest", type=Path, default=Path("data/samples_manifest.json"))
    ap.add_argument("--seed", type=int, default=SAMPLES_SEED)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    entries = {**write_pdfs(args.out, rng), **write_logs(args.out, rng)}
    args.manifest.write_text(json.dumps({"seed": args.seed, "files": entries}, indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    print(f"{len(entries)} sample files -> {args.out}; manifest {args.manifest}")


if __name__ == "__main__":
    main()
