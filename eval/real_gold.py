"""Real gold sets for `pipeline eval --gold DIR`: PDFs with invoice2data expectations or ZUGFeRD/Factur-X header
JSON beside them, mapped onto the documents dataset's fields, and how each field is compared.

Three gold formats are read, one JSON per PDF of the same stem:
- the documents dataset's own fields: an object with `doc_type`, `issuer`, `reference`, `date`, `currency`,
  `amount` (null where the page does not show it), as in the shared `invoices_more/` and `receipts/` folders;
- invoice2data test files: a list holding one object with `issuer`, `invoice_number`, `date` (ISO), `currency`,
  `amount` (a number);
- ZUGFeRD/Factur-X header JSON taken from the embedded CII XML: `invoice_number`, `type_code`, `issue_date`
  (YYYYMMDD), `seller.name`, `currency`, `grand_total`.

Scored fields: doc_type, issuer, reference (invoice number), date, currency, amount (grand total). Comparison is
exact after the normalisation each field needs: whitespace and case for names, a leading '#' or spaces in numbers,
the decimal value of amounts. invoice2data names issuers by a short label ("Free", "OYO") where the document prints
the full name ("Free Service Abonné"), so an issuer also counts when the prediction holds the gold's words in order
with at most `ISSUER_EXTRA_WORDS` more.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

SCORED_FIELDS = ("doc_type", "issuer", "reference", "date", "currency", "amount")
ISSUER_EXTRA_WORDS = 3


HOLDOUT_EVERY = 4
"""Every fourth gold document in name order (the 4th, 8th, ...) is held out: development looks at the others only,
and the held-out slice is scored once a change is done (`pipeline eval --gold DIR --split holdout`)."""


@dataclass(frozen=True)
class GoldDocument:
    id: str
    pdf: Path
    gold: dict[str, Any]
    source_format: str  # "fields" | "invoice2data" | "zugferd"


def _words(s: str) -> list[str]:
    s = unicodedata.normalize("NFKC", s).casefold()
    return re.findall(r"\w+", s)


def issuer_matches(pred: Any, gold: Any) -> bool:
    if not isinstance(pred, str) or not isinstance(gold, str):
        return pred == gold
    p, g = _words(pred), _words(gold)
    if not g or len(p) > len(g) + ISSUER_EXTRA_WORDS:
        return False
    return any(p[i:i + len(g)] == g for i in range(len(p) - len(g) + 1))


def _reference_key(s: str) -> str:
    return re.sub(r"\s", "", s).lstrip("#").casefold()


def _decimal(v: Any) -> Decimal | None:
    try:
        return Decimal(str(v))
    except (InvalidOperation, ValueError):
        return None


def field_matches(name: str, pred: Any, gold: Any) -> bool:
    if pred is None or gold is None:
        return pred is None and gold is None
    if name == "issuer":
        return issuer_matches(pred, gold)
    if name == "reference":
        return _reference_key(str(pred)) == _reference_key(str(gold))
    if name == "amount":
        a, b = _decimal(pred), _decimal(gold)
        return a is not None and a == b
    return pred == gold


def _from_invoice2data(obj: dict[str, Any]) -> dict[str, Any]:
    amount = obj.get("amount")
    return {
        "doc_type": "invoice",
        "issuer": obj.get("issuer"),
        "reference": obj.get("invoice_number"),
        "date": obj.get("date"),
        "currency": obj.get("currency"),
        "amount": None if amount is None else f"{Decimal(str(amount)).quantize(Decimal('0.01'))}",
    }


def _from_zugferd(obj: dict[str, Any]) -> dict[str, Any]:
    d = str(obj.get("issue_date") or "")
    return {
        "doc_type": "invoice",
        "issuer": " ".join(str((obj.get("seller") or {}).get("name") or "").split()) or None,
        "reference": obj.get("invoice_number"),
        "date": f"{d[:4]}-{d[4:6]}-{d[6:8]}" if re.fullmatch(r"\d{8}", d) else None,
        "currency": obj.get("currency"),
        "amount": obj.get("grand_total"),
    }


def _from_fields(obj: dict[str, Any]) -> dict[str, Any]:
    amount = obj.get("amount")
    return {**{k: obj.get(k) for k in SCORED_FIELDS},
            "amount": None if amount is None else f"{Decimal(str(amount)).quantize(Decimal('0.01'))}"}


def split_gold(docs: list[GoldDocument], split: str) -> list[GoldDocument]:
    """`dev`, `holdout` (every HOLDOUT_EVERY-th in name order) or `all`."""
    if split == "all":
        return docs
    if split not in ("dev", "holdout"):
        raise ValueError(f"unknown split {split!r} (dev|holdout|all)")
    held = {i for i in range(len(docs)) if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1}
    return [d for i, d in enumerate(docs) if (i in held) == (split == "holdout")]


def load_gold_dir(gold_dir: Path, split: str = "all") -> list[GoldDocument]:
    """Every PDF in `gold_dir` with a same-stem JSON in one of the three formats, in name order (`split`: see
    `split_gold`)."""
    docs = []
    for pdf in sorted(gold_dir.glob("*.pdf")):
        path = pdf.with_suffix(".json")
        if not path.is_file():
            continue
        obj = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(obj, list):
            if not obj:
                continue
            gold, fmt = _from_invoice2data(obj[0]), "invoice2data"
        elif isinstance(obj, dict) and set(SCORED_FIELDS) <= set(obj):
            gold, fmt = _from_fields(obj), "fields"
        elif isinstance(obj, dict) and "invoice_number" in obj and ("grand_total" in obj or "seller" in obj):
            gold, fmt = _from_zugferd(obj), "zugferd"
        else:
            raise ValueError(f"{path}: not a fields object, an invoice2data list or a ZUGFeRD header object")
        docs.append(GoldDocument(pdf.stem, pdf, gold, fmt))
    if not docs:
        raise FileNotFoundError(f"no PDF with a gold JSON beside it in {gold_dir}")
    return split_gold(docs, split)
