"""Ingest every file of fetched bank-export fixture folders as `pipeline run` would, and say per repository how many
exports were read with every record accounted for (docs/eval/bank-exports.md).

    .venv/bin/python scripts/bank_corpus.py ROOT [--default-currency EUR] [--model] [--json out.json] [--failures]

ROOT holds one folder per repository (`owner+name`, e.g. a `git archive` of a fetched snapshot). A file counts as
*read* when it gave transaction rows, no row errors other than summary / non-transaction lines, and, where the format
lets its records be counted independently (OFX, MT940, QIF, CAMT), rows + row errors equal that count.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pipeline.ingest.discover import ingest

# Project files, documentation and importer configuration (hledger's CSV rules) in those repositories, not exports.
_NOT_EXPORT = re.compile(r"(\.beancount|\.conf|\.rules|requirements\.txt|\.pdf|\.yml|\.py|\.md)$", re.I)
# Fixtures that are not transaction logs although they are tables (address books, account lists, a deliberately
# invalid file): counted under "without transactions". Named here because only reading them tells.
_NOT_LOGS = {"examples/self-tracking/a.tsv", "examples/self-tracking/c.tsv", "examples/self-tracking/d.csv",
             "examples/csv/cctax/rotki/address_book_entries.csv", "examples/csv/cctax/rotki/blockchain-accounts.csv",
             "tests/test_files/invalid.txt"}
_NOT_TX_ERRORS = ("SummaryRow", "NotATransaction")
# Files the ingest names as no log format at all (ledger journals, rules, scripts, images, licences, hidden files
# in the fixture folders): counted apart, not as exports.
_NOT_EXPORT_FORMAT = ("UnsupportedFormat", "Skipped")
# Files the ingest reads as documents (an order page saved as HTML): they become document rows, not transactions.
_DOCUMENT_KINDS = ("pdf", "markup", "einvoice")


def expected_records(path: Path) -> int | None:
    """The record count a format states independently of our readers (its entry tags), or None."""
    text = path.read_bytes().decode("latin-1")
    suffix = path.suffix.lower()
    if suffix in (".ofx", ".qfx") or "<OFX>" in text[:4000].upper():
        return len(re.findall(r"(?i)<STMTTRN>", text)) + len(re.findall(r"(?i)<INVTRAN>", text))
    if suffix in (".sta", ".940", ".mt940") or re.search(r"(?m)^:61:", text):
        return len(re.findall(r"(?m)^:61:", text))
    if suffix == ".qif":
        return len([r for r in re.split(r"(?m)^\^", text) if re.search(r"(?m)^[TU][-+0-9.,]", r)])
    if suffix == ".xml":  # an entry, or each of its transaction details (a CAMT.054 notification's payments)
        entries = re.findall(r"<(?:\w+:)?Ntry>(.*?)</(?:\w+:)?Ntry>", text, re.S)
        return sum(max(1, len(re.findall(r"<(?:\w+:)?TxDtls>", e))) for e in entries)
    return None


def classify(r: dict[str, Any]) -> str:
    first = r["first_error"]
    if r["status"] == "duplicate":
        return "duplicate"
    if first and first[0] in _NOT_EXPORT_FORMAT:
        return "not an export"
    if r["kind"] in _DOCUMENT_KINDS:
        return "not an export"
    if (r["expected"] == 0 or r["file"] in _NOT_LOGS
            or (first and (first[0] in ("EmptyTable", "NotTransactions") or "empty file" in first[1]))):
        return "no transactions"
    if r["rows"] > 0 and r["tx_errors"] == 0 and r["accounted"]:
        return "read"
    return "partly read" if r["rows"] > 0 else "error"


def measure_repo(repo: Path, currency: str | None, llm: Any, cfg: Any) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for f in (f for f in repo.rglob("*") if f.is_file() and not _NOT_EXPORT.search(f.name)):
            rel = f.relative_to(repo)
            dst = root / rel.parent / rel.name.lstrip("_")  # '_'-prefixed names are skipped by design
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dst)
        res = ingest(root, progress=False, default_currency=currency)
        if llm is not None and res.layout_questions:
            from pipeline.run import _map_layouts
            res = _map_layouts(cfg, llm, res)
        errs: dict[str, list[tuple[str, str, int | None]]] = collections.defaultdict(list)
        for e in res.errors.to_pylist():
            errs[e["source_file"]].append((e["error_class"], e["message"], e.get("source_row")))
        rows = []
        for fe in res.files.to_pylist():
            rel = fe["source_file"]
            expected = expected_records(root / rel)
            accounted = fe["n_rows"] + sum(1 for _, _, row in errs[rel] if row is not None)
            rows.append({"file": rel, "kind": fe["kind"], "status": fe["status"], "rows": fe["n_rows"],
                         "expected": expected, "accounted": expected is None or expected == accounted,
                         "tx_errors": sum(1 for c, _, _ in errs[rel] if c not in _NOT_TX_ERRORS),
                         "first_error": list(errs[rel][0][:2]) if errs[rel] else None,
                         "layout_source": json.loads(fe["details"]).get("layout_source") if fe["details"] else None,
                         "columns": json.loads(fe["details"]).get("columns") if fe["details"] else None})
        return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--default-currency", default=None)
    ap.add_argument("--model", action="store_true", help="let the default model map layouts detection cannot decide")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--failures", action="store_true", help="list each file not read, with its first error")
    args = ap.parse_args()
    llm = cfg = None
    if args.model:
        from pipeline.config import RunConfig
        from pipeline.run import load_llm
        cfg = RunConfig(input_dir=args.root, default_currency=args.default_currency)
        llm = load_llm(cfg.model_dir, **cfg.engine_kwargs())
    result = {repo.name: measure_repo(repo, args.default_currency, llm, cfg) for repo in sorted(args.root.iterdir())
              if repo.is_dir()}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    print("| repository | files | not an export format | duplicates | without transactions | exports | read | "
          "partly read | error rows |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    total: collections.Counter[str] = collections.Counter()
    for repo, rows in result.items():
        c = collections.Counter(classify(r) for r in rows)
        c["files"] = len(rows)
        c["exports"] = len(rows) - c["duplicate"] - c["no transactions"] - c["not an export"]
        total.update(c)
        print(f"| {repo.replace('+', '/')} | {c['files']} | {c['not an export']} | {c['duplicate']} | "
              f"{c['no transactions']} | "
              f"{c['exports']} | {c['read']} | {c['partly read']} | {c['error']} |")
    share = total["read"] / total["exports"] if total["exports"] else 0.0
    print(f"| **all** | {total['files']} | {total['not an export']} | {total['duplicate']} | "
          f"{total['no transactions']} | {total['exports']} | "
          f"{total['read']} ({share:.0%}) | {total['partly read']} | {total['error']} |")
    if args.failures:
        for repo, rows in result.items():
            for r in rows:
                if (k := classify(r)) in ("partly read", "error"):
                    cls, msg = r["first_error"] or ("", "")
                    print(f"  - {repo}: `{r['file']}` {k}: {cls}: {msg[:150]}")


if __name__ == "__main__":
    main()
