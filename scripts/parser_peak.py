"""Measure the ingest parser's peak memory per input format and size, to keep the per-file limits consistent with
what the parsers can do (`pipeline.ingest.limits`, docs/bench/parser-memory.md).

Each format gets synthetic files of the requested sizes (made up here, in a temp dir); each file is parsed by
`pipeline.ingest.worker.parse_file` in a fresh Python process (as the ingest worker does), which reports its peak
resident memory before and after the parse. Usage:

    python scripts/parser_peak.py [--mib 8 32] [--formats csv jsonl ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

_DESCRIPTIONS = ("CARD PAYMENT GROCER 1234", "SEPA TRANSFER RENT", "SALARY ACME LTD", "ATM WITHDRAWAL",
                 "DIRECT DEBIT INSURANCE", "ONLINE SHOP ORDER 99812")


def _records(n: int) -> list[tuple[date, str, str]]:
    rng = random.Random(7)
    start = date(2024, 1, 1)
    return [(start + timedelta(days=i % 360), f"{rng.randint(-99999, 99999) / 100:.2f}",
             f"{_DESCRIPTIONS[i % len(_DESCRIPTIONS)]} {i}") for i in range(n)]


def _fill(path: Path, target: int, head: str, tail: str, line: Callable[[int, date, str, str], str]) -> None:
    """Write `head`, records as `line(index, date, amount, description)` writes them until the file reaches
    `target` bytes, then `tail`."""
    per = len(line(0, date(2024, 1, 1), "-1.00", _DESCRIPTIONS[0]).encode())
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(head)
        for i, (d, a, text) in enumerate(_records(max(1, target // per))):
            f.write(line(i, d, a, text))
        f.write(tail)


def make(fmt: str, path: Path, target: int) -> Path:
    if fmt == "csv":
        _fill(path, target, "date,amount,currency,description\n", "",
              lambda i, d, a, t: f"{d.isoformat()},{a},EUR,{t}\n")
    elif fmt == "jsonl":
        _fill(path, target, "", "", lambda i, d, a, t: json.dumps(
            {"date": d.isoformat(), "amount": a, "currency": "EUR", "description": t}) + "\n")
    elif fmt == "json":
        _fill(path, target, '{"account": "DE02120300000000202051", "transactions": [\n', "{}]}\n",
              lambda i, d, a, t: json.dumps({"date": d.isoformat(), "amount": a, "currency": "EUR",
                                                 "description": t}) + ",\n")
    elif fmt == "ofx":
        head = ("OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\nENCODING:USASCII\nCHARSET:1252\n"
                "COMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n<OFX><BANKMSGSRSV1><STMTTRNRS><TRNUID>1"
                "<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS><CURDEF>EUR<BANKACCTFROM><BANKID>12030000"
                "<ACCTID>202051<ACCTTYPE>CHECKING</BANKACCTFROM><BANKTRANLIST><DTSTART>20240101<DTEND>20241231\n")
        tail = ("</BANKTRANLIST><LEDGERBAL><BALAMT>0.00<DTASOF>20241231</LEDGERBAL></STMTRS></STMTTRNRS>"
                "</BANKMSGSRSV1></OFX>\n")
        _fill(path, target, head, tail, lambda i, d, a, t: (
            f"<STMTTRN><TRNTYPE>OTHER<DTPOSTED>{d:%Y%m%d}<TRNAMT>{a}<FITID>{i}<NAME>{t}</STMTTRN>\n"))
    elif fmt == "qif":
        _fill(path, target, "!Type:Bank\n", "", lambda i, d, a, t: f"D{d:%m/%d/%Y}\nT{a}\nP{t}\n^\n")
    elif fmt == "mt940":
        _fill(path, target, ":20:STMT\n:25:DE02120300000000202051\n:28C:1/1\n:60F:C240101EUR0,00\n",
              ":62F:C241231EUR0,00\n",
              lambda i, d, a, t: (f":61:{d:%y%m%d}{'D' if a.startswith('-') else 'C'}"
                                     f"{a.lstrip('-').replace('.', ',')}NTRFNONREF\n:86:{t}\n"))
    elif fmt == "camt":
        head = ('<?xml version="1.0" encoding="UTF-8"?>\n<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02">'
                "<BkToCstmrStmt><GrpHdr><MsgId>1</MsgId><CreDtTm>2024-12-31T00:00:00</CreDtTm></GrpHdr><Stmt><Id>1</Id>"
                "<CreDtTm>2024-12-31T00:00:00</CreDtTm><Acct><Id><IBAN>DE02120300000000202051</IBAN></Id>"
                "<Ccy>EUR</Ccy></Acct>\n")
        _fill(path, target, head, "</Stmt></BkToCstmrStmt></Document>\n", lambda i, d, a, t: (
            f'<Ntry><Amt Ccy="EUR">{a.lstrip("-")}</Amt><CdtDbtInd>{"DBIT" if a.startswith("-") else "CRDT"}'
            f"</CdtDbtInd><Sts>BOOK</Sts><BookgDt><Dt>{d.isoformat()}</Dt></BookgDt><NtryDtls><TxDtls><RmtInf>"
            f"<Ustrd>{t}</Ustrd></RmtInf></TxDtls></NtryDtls></Ntry>\n"))
    elif fmt == "html_table":
        _fill(path, target, "<html><body><table><tr><th>Date</th><th>Amount</th><th>Currency</th>"
              "<th>Description</th></tr>\n", "</table></body></html>\n", lambda i, d, a, t: (
                  f"<tr><td>{d.isoformat()}</td><td>{a}</td><td>EUR</td><td>{t}</td></tr>\n"))
    elif fmt == "spreadsheet_xml":
        def cell(v: object, kind: str = "String") -> str:
            return f'<Cell><Data ss:Type="{kind}">{v}</Data></Cell>'

        _fill(path, target, '<?xml version="1.0"?><?mso-application progid="Excel.Sheet"?><Workbook xmlns='
              '"urn:schemas-microsoft-com:office:spreadsheet" xmlns:ss="urn:schemas-microsoft-com:office:spreadsheet">'
              '<Worksheet ss:Name="Activity"><Table><Row>' + "".join(cell(h) for h in ("Date", "Amount", "Currency",
                                                                                        "Description")) + "</Row>\n",
              "</Table></Worksheet></Workbook>\n", lambda i, d, a, t: (
                  f"<Row>{cell(d.isoformat())}{cell(a, 'Number')}{cell('EUR')}{cell(t)}</Row>\n"))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        n = max(1, target // 20)  # Parquet compresses: about 20 bytes a record on these columns
        recs = _records(n)
        pq.write_table(pa.table({"date": [r[0] for r in recs], "amount": [r[1] for r in recs],
                                 "currency": ["EUR"] * n, "description": [r[2] for r in recs]}), path)
    elif fmt == "xlsx":
        from openpyxl import Workbook

        wb = Workbook(write_only=True)
        ws = wb.create_sheet()
        ws.append(["date", "amount", "currency", "description"])
        for d, a, t in _records(max(1, target // 30)):  # about 30 bytes a row, zipped
            ws.append([d, float(a), "EUR", t])
        wb.save(path)
    elif fmt == "pdf":
        from fpdf import FPDF

        pdf = FPDF()
        pdf.set_font("helvetica", size=8)
        lines = [f"{d.isoformat()}  {t:<40} {a:>12} EUR" for d, a, t in _records(60 * 4000)]
        for k in range(max(1, target // 2500)):  # about 2.5 kB a compressed page of this text
            pdf.add_page()
            pdf.multi_cell(0, 3.5, "\n".join(lines[(75 * k) % len(lines):(75 * k) % len(lines) + 75]))
        pdf.output(str(path))
    elif fmt == "html":
        rows = "".join(f"<tr><td>{d}</td><td>{t}</td><td>{a}</td></tr>\n" for d, a, t in _records(target // 70))
        path.write_text(f"<html><body><h1>Annual report</h1><table>{rows}</table></body></html>", "utf-8")
    else:
        raise SystemExit(f"unknown format {fmt}")
    return path


_KIND = {"pdf": "pdf", "html": "markup"}
_SUFFIX = {"camt": ".xml", "html_table": ".xls", "spreadsheet_xml": ".xls",
           "xlsx": ".xlsx", "parquet": ".parquet", "pdf": ".pdf", "html": ".html", "qif": ".qif", "mt940": ".sta",
           "ofx": ".ofx", "json": ".json", "jsonl": ".jsonl", "csv": ".csv"}

_CHILD = r"""
import json, sys
def hwm():  # this process's peak resident memory (VmHWM: per address space, unlike ru_maxrss it is not inherited)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
from pipeline.ingest.limits import IngestLimits
from pipeline.ingest.worker import FileTask, parse_file
from pipeline.ingest import transactions, pdf, markup  # the imports a worker holds before its first file
from pipeline.identity import file_sha256
kind, path = sys.argv[1], sys.argv[2]
sha = file_sha256(path)
base = hwm()
out = parse_file(FileTask(kind, path, path.rsplit("/", 1)[-1], sha, "EUR"), IngestLimits())
peak = hwm()
res = getattr(out, "result", None)
rows = getattr(getattr(out, "rows", None), "num_rows", None)
print(json.dumps({"base_kib": base, "peak_kib": peak, "rows": rows, "failure": getattr(out, "message", None),
                  "doc_error": getattr(res, "message", None)}))
"""


def measure(kind: str, path: Path) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "wall_s": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--formats", nargs="+", default=list(_SUFFIX))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats:
            for mib in args.mib:
                path = make(fmt, Path(tmp) / f"{fmt}-{mib}{_SUFFIX[fmt]}", mib << 20)
                size = path.stat().st_size
                r = {"format": fmt, "size_mib": round(size / (1 << 20), 1), **measure(_KIND.get(fmt, "transactions"),
                                                                                     path)}
                if "peak_kib" in r:
                    r["parse_mib"] = round((r["peak_kib"] - r["base_kib"]) / 1024)
                    r["per_file_mib"] = round(r["parse_mib"] / max(size / (1 << 20), 1e-9), 1)
                print(json.dumps(r), flush=True)
                results.append(r)
                path.unlink()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
