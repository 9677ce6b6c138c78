"""Measure OCR engines and settings on scanned documents with gold values: how many gold amounts, dates and issuers the
pipeline's scanners find in each setting's text, and the seconds per page.

    .venv/bin/python scripts/ocr_settings.py ../shared/realdata/receipts --limit 30 --json /tmp/ocr.json

A gold value counts as read when the candidate scanners find it (amount, date) or when the issuer's words appear
in order in the text; this is what extraction can then choose from.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from pipeline.grounding import amount_candidates, date_candidates
from pipeline.ingest.ocr import OcrSettings, ocr_pdf_pages

SETTINGS = {
    "rapid-native": OcrSettings(engine="rapidocr"),
    "rapid-300dpi": OcrSettings(engine="rapidocr", dpi=300),
    "rapid-200dpi": OcrSettings(engine="rapidocr", dpi=200),
    "300dpi-psm3-all": OcrSettings(engine="tesseract", dpi=300, psm=3),
    "native-psm3-all": OcrSettings(engine="tesseract", dpi=None, psm=3),
    "native-psm4-all": OcrSettings(engine="tesseract", dpi=None, psm=4),
    "native-psm6-all": OcrSettings(engine="tesseract", dpi=None, psm=6),
    "native-psm4-eng": OcrSettings(engine="tesseract", dpi=None, psm=4, languages="eng"),
    "300dpi-psm4-eng": OcrSettings(engine="tesseract", dpi=300, psm=4, languages="eng"),
}


def _words(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.casefold()))


def found(gold: dict, text: str) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    out["amount"] = None if not gold.get("amount") else gold["amount"] in amount_candidates(text)
    out["date"] = None if not gold.get("date") else gold["date"] in date_candidates(text)
    out["issuer"] = None if not gold.get("issuer") else _words(gold["issuer"]) in _words(text)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    pdfs = sorted(args.folder.glob("*.pdf"))[: args.limit]
    report = {}
    for name in args.settings.split(","):
        hits: dict[str, list[int]] = {"amount": [0, 0], "date": [0, 0], "issuer": [0, 0]}
        seconds = 0.0
        for pdf in pdfs:
            gold = json.loads(pdf.with_suffix(".json").read_text())
            start = time.perf_counter()
            text = ocr_pdf_pages(pdf.read_bytes(), [1], SETTINGS[name]).texts.get(1, "")
            seconds += time.perf_counter() - start
            for field, ok in found(gold, text).items():
                if ok is not None:
                    hits[field][0] += int(ok)
                    hits[field][1] += 1
        report[name] = {"seconds_per_page": round(seconds / len(pdfs), 2),
                        **{f: f"{a}/{b}" for f, (a, b) in hits.items()},
                        "all": round(sum(a for a, _ in hits.values()) / sum(b for _, b in hits.values()), 3)}
        print(name, report[name], flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
