"""Read every PDF (and standalone XML) under a folder as `pipeline run` would, and say which e-invoices were read
from their XML: the attachment found (by name tree or /AF), whether its fields parse, and its type code.

    .venv/bin/python scripts/einvoice_corpus.py /path/to/ZUGFeRD-corpus --json /tmp/einvoice.json

Used to measure the e-invoice reader on the public ZUGFeRD/Factur-X corpus (docs/eval/einvoice-corpus.md).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from pipeline.ingest.einvoice import _root_name, einvoice_fields, embedded_xml


def _facturx_finds(data: bytes) -> bool:
    import io
    import logging

    from facturx import get_xml_from_pdf

    logging.getLogger("facturx").setLevel(logging.ERROR)
    try:
        _, xml = get_xml_from_pdf(io.BytesIO(data), check_xsd=False)
        return bool(xml)
    except Exception:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    for path in sorted(p for p in args.folder.rglob("*") if p.suffix.lower() in (".pdf", ".xml")):
        data = path.read_bytes()
        if path.suffix.lower() == ".xml":
            found = (path.name, data) if _root_name(data) in ("CrossIndustryInvoice", "CrossIndustryDocument",
                                                            "Invoice", "CreditNote") else None
            old = None
        else:
            found = embedded_xml(data)
            old = _facturx_finds(data)
        fields = einvoice_fields(found[1]) if found else None
        rows.append({"file": str(path.relative_to(args.folder)), "kind": path.suffix.lower()[1:],
                     "xml_found": found is not None, "facturx_found": old,
                     "read": fields is not None, "doc_type": fields and fields["doc_type"]})
    for kind in ("pdf", "xml"):
        sub = [r for r in rows if r["kind"] == kind]
        if not sub:
            continue
        with_xml = [r for r in sub if r["xml_found"]]
        print(f"{kind}: {len(sub)} files, {len(with_xml)} carry or are an e-invoice XML, "
              f"{sum(r['read'] for r in with_xml)} of those read from it; "
              + (f"factur-x's lookup finds {sum(bool(r['facturx_found']) for r in sub)}; " if kind == "pdf" else "")
              + f"types {dict(Counter(r['doc_type'] for r in with_xml if r['read']))}")
        for r in with_xml:
            if not r["read"]:
                print("  not read:", r["file"])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
