"""OFX / QFX statements (bank, credit card and investment) with ofxparse.

ofxparse rather than ofxtools: ofxtools validates against the OFX spec and rejected all three real exports we
tried (a 10-digit BANKID, an OFX 2 header with a 14-digit DTSERVER, investment transactions); ofxparse reads them.
"""

from __future__ import annotations

import io
import re
import warnings
from collections import Counter
from decimal import Decimal

from pipeline.ingest.formats.statement import Entry, Statement, clean, require_entries
from pipeline.ingest.tabular import NotATable, decode_candidates
from pipeline.ingest.text_lines import line_numbers

SUFFIXES = frozenset({".ofx", ".qfx"})
_FITID = re.compile(r"<FITID>\s*([^<\r\n]+)", re.IGNORECASE)
_TZ_SUFFIX = re.compile(r"\[[^\]]*\]$")


def sniff(head: bytes) -> bool:
    h = head[:2048].upper()
    return b"OFXHEADER" in h or b"<OFX>" in h


def _fitid_lines(text: str) -> dict[str, int]:
    """FITID -> 1-based line, for ids that occur once; the user finds a transaction in the file by its line."""
    seen: Counter[str] = Counter()
    lines: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        for m in _FITID.finditer(line):
            fid = m.group(1).strip()
            seen[fid] += 1
            lines[fid] = n
    return {k: v for k, v in lines.items() if seen[k] == 1}


_EMPTY_CLOSED = re.compile(rb"<([A-Za-z0-9.]+)>\s*</\1>|<[A-Za-z0-9.]+\s*/>|<!--.*?-->", re.DOTALL)
_OPEN_TAG = re.compile(rb"<([A-Za-z0-9.]+)>(\s*)(?=<)")


def repair_empty_tags(data: bytes) -> bytes:
    """OFX with its empty elements removed. OFX 1.x (SGML) leaves leaf elements unclosed, and exporters write
    empty ones (`<NAME><MEMO>x`, `<ORG><FID>`, `<name></name>`, `<DTSTART />`) that ofxparse cannot read (an
    IndexError, or the transaction dropped as 'Empty transaction name'). An element is a leaf when the file never
    closes it; an empty leaf says nothing, so dropping it loses nothing; comments go too (one before the header
    hides it from ofxparse). Written here because no maintained OFX reader repairs them."""
    data = _EMPTY_CLOSED.sub(lambda m: b"\n" * m.group(0).count(b"\n"), data)  # line numbers stay as they were
    closed = {m.upper() for m in re.findall(rb"</([A-Za-z0-9.]+)>", data)}
    return _OPEN_TAG.sub(lambda m: m.group(0) if m.group(1).upper() in closed else m.group(2), data)


_SGML_HEADER = re.compile(rb"(?im)^\s*(ENCODING|CHARSET)\s*:\s*([A-Za-z0-9-]+)")
_XML_ENCODING = re.compile(rb"<\?xml[^>]*encoding=[\"']([A-Za-z0-9_.-]+)")


def _declared_encoding(head: bytes) -> str | None:
    """The encoding an OFX file declares: its SGML header (ENCODING:UTF-8, or USASCII with CHARSET:1252 / 8859-1)
    or its XML declaration."""
    if m := _XML_ENCODING.search(head):
        return m.group(1).decode()
    fields = {k.upper(): v.upper() for k, v in _SGML_HEADER.findall(head)}
    if fields.get(b"ENCODING") in (b"UTF-8", b"UNICODE"):
        return "utf-8"
    charset = fields.get(b"CHARSET", b"NONE")
    return {b"8859-1": "iso-8859-1", b"NONE": None}.get(charset, "cp" + charset.decode())


def ascii_body(data: bytes) -> bytes:
    """The file with every character past ASCII written as an XML character reference. ofxparse takes the
    encoding only from an SGML header at the very start of the file and reads everything else as ASCII, so an OFX 2
    (XML) file, or an OFX 1 file after a comment, fails on its first accented letter; its HTML parser turns the
    references back into the letters. The text is decoded as the file declares, else as `decode_candidates`
    ranks it."""
    if data.isascii():
        return data
    declared = _declared_encoding(data[:4096])
    try:
        text = data.decode(declared) if declared else decode_candidates(data)[0][1]
    except (LookupError, UnicodeDecodeError):
        text = decode_candidates(data)[0][1]
    return text.encode("ascii", "xmlcharrefreplace")


_TRANSACTION = re.compile(rb"<STMTTRN>(.*?)</STMTTRN>", re.IGNORECASE | re.DOTALL)
_LINE_ID = "~line-"  # prefix of the stand-in id of a transaction that has none (never written to a row)


def with_line_ids(data: bytes) -> bytes:
    """Every STMTTRN without a FITID given its own line as a stand-in id: ofxparse drops a transaction that has
    no FITID, and the id is only used here to find the transaction's line in the file."""

    found = list(_TRANSACTION.finditer(data))
    lines = dict(zip((m.start() for m in found), line_numbers(data, [m.start() for m in found]), strict=True))

    def fill(m: re.Match[bytes]) -> bytes:
        if re.search(rb"<FITID>", m.group(1), re.IGNORECASE):
            return m.group(0)
        return b"<STMTTRN><FITID>" + f"{_LINE_ID}{lines[m.start()]}".encode() + m.group(0)[len(b"<STMTTRN>"):]

    return _TRANSACTION.sub(fill, data)


_TAG = re.compile(rb"(</?[A-Za-z0-9_.]+>)")


def close_leaf_tags(data: bytes) -> bytes:
    """OFX 1.x with every leaf element closed where the next tag begins, as ofxparse's own preprocessing does
    before it parses. Done here first because ofxparse (0.21) checks each open tag against a *list* of the file's
    closing tags: quadratic in the transactions (a 16 MiB export took many minutes). On a file whose elements are
    all closed its check stops at the first match, early in the list."""
    closed = {m.upper() for m in re.findall(rb"</([A-Za-z0-9_.]+)>", data)}
    out: list[bytes] = []
    pending: bytes | None = None
    for i, token in enumerate(_TAG.split(data)):  # odd positions hold the tags
        if i % 2 or (token.startswith(b"<") and not token.startswith(b"<!")):  # a tag, or a <?...?> instruction
            if pending is not None:
                out.append(b"</" + pending + b">")
                pending = None
            if i % 2 and not token.startswith(b"</") and token[1:-1].upper() not in closed:
                pending = token[1:-1]
        out.append(token)
    return b"".join(out)  # a leaf open at the very end stays open, as ofxparse leaves it


def read(data: bytes) -> Statement:
    # lazy: one bank format's parser, loaded when such a file appears
    import ofxparse

    class _WallClock(ofxparse.OfxParser):
        """Times as the statement prints them: ofxparse converts `20240301000000[+1:CET]` to UTC, which moves a
        booking on the 1st into the previous day and month; a booking date stays its date, as in a CSV."""

        @classmethod
        def parseOfxDateTime(cls, ofxDateTime):  # type: ignore[no-untyped-def]  # noqa: N802, N803 (its API)
            return super().parseOfxDateTime(_TZ_SUFFIX.sub("", ofxDateTime.strip()))

    data = close_leaf_tags(with_line_ids(repair_empty_tags(ascii_body(data))))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # fail_fast=False: a transaction ofxparse cannot read is set aside with its reason, not the file
            ofx = _WallClock.parse(io.BytesIO(data), fail_fast=False)
    except Exception as exc:  # ofxparse raises many types (OfxParserException, ValueError, IndexError ...)
        raise NotATable(f"unreadable OFX: {type(exc).__name__}: {exc}") from exc
    found: list[tuple[str | None, Entry]] = []
    discarded: list[tuple[str | None, str]] = []
    for account in ofx.accounts or []:
        st = account.statement
        if st is None:
            continue
        for entry in getattr(st, "discarded_entries", []) or []:
            fitid = _FITID.search(str(entry.get("content", "")))
            discarded.append((fitid.group(1).strip() if fitid else None, str(entry.get("error", "unreadable"))))
        currency = (getattr(st, "currency", None) or "").upper() or None
        for tx in getattr(st, "transactions", []) or []:
            fitid = str(getattr(tx, "id", "") or "").strip() or None
            if hasattr(tx, "trnamt") or hasattr(tx, "payee"):  # bank / card: STMTTRN
                when, amount = tx.date, tx.amount
                cp, desc = clean(tx.payee), clean(tx.memo)
            else:  # investment: BUYSTOCK, INCOME, REINVEST ...
                when, amount = tx.tradeDate or tx.settleDate, tx.total
                cp = None
                parts = [clean(tx.type), clean(getattr(tx, "security", None)), clean(tx.memo)]
                desc = " | ".join(p for p in parts if p) or None
            found.append((fitid, Entry(source_row=0, booked=when, amount=Decimal(str(amount)), currency=currency,
                                       account=clean(account.account_id), counterparty=cp, description=desc)))
    text = data.decode("utf-8", errors="replace")
    by_line = _fitid_lines(text)
    use_lines = (bool(found) and all(f in by_line for f, _ in found)
                 and len({by_line[f] for f, _ in found if f}) == len(found))
    out = Statement("OFX", "line of the transaction's FITID" if use_lines else "transaction record")
    for i, (fitid, e) in enumerate(found, start=1):
        row = by_line[fitid] if use_lines and fitid else i
        if e.booked is None or e.amount is None:
            out.bad.append((row, "OFX transaction without a date or an amount"))
            continue
        out.entries.append(Entry(row, e.booked, e.amount, e.currency, e.account, e.counterparty, e.description))
    for j, (fitid, reason) in enumerate(discarded, start=len(found) + 1):
        row = by_line[fitid] if use_lines and fitid and fitid in by_line else j
        out.bad.append((row, f"OFX transaction not readable: {' '.join(reason.split())}"))
    return require_entries(out)
