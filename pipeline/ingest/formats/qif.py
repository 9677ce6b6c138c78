"""Quicken Interchange Format (QIF) with quiffen. QIF states no currency (the file-level hint or
--default-currency supplies it, else the rows keep it empty); its dates are month-first unless one of them cannot
be."""

from __future__ import annotations

import re
import warnings

from pipeline.ingest.formats.statement import Entry, Statement, clean, require_entries
from pipeline.ingest.tabular import decode_candidates
from pipeline.ingest.values import detect_decimal_comma, parse_amount

SUFFIXES = frozenset({".qif"})


def sniff(head: bytes) -> bool:
    return head.lstrip().upper().startswith((b"!TYPE:", b"!ACCOUNT", b"!OPTION:", b"!CLEAR:"))


_AMOUNT_FIELDS = ("T", "U", "$")  # transaction amount, its duplicate, split amount


def _canonical_amounts(text: str) -> str:
    """Amount lines rewritten as plain decimals. quiffen drops every comma, so a European '-1.234,56' would read
    as -1.23456; the decimal mark is decided for the whole file, as for a CSV column, and each value parsed."""

    lines = text.split("\n")
    samples = [ln[1:].strip() for ln in lines if ln[:1] in _AMOUNT_FIELDS]
    comma = detect_decimal_comma(samples)
    for i, ln in enumerate(lines):
        if ln[:1] in _AMOUNT_FIELDS and ln[1:].strip():
            try:
                value, _ = parse_amount(ln[1:].strip(), comma)
            except ValueError:
                continue  # left as written: quiffen reports it
            if value is not None:
                lines[i] = f"{ln[0]}{value}"
    return "\n".join(lines)


_DATE_PARTS = re.compile(r"^D\s*(\d{1,2})\s*[/.\-]\s*(\d{1,2})")


def _day_first(text: str) -> bool:
    """One reading for the whole file: day-first only when some date cannot be month-first (a first part > 12)."""
    return any(int(m.group(1)) > 12 for ln in text.split("\n") if (m := _DATE_PARTS.match(ln)))


def _parse(text: str, day_first: bool):  # type: ignore[no-untyped-def]
    # lazy: one bank format's parser, loaded when such a file appears
    import quiffen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quiffen.Qif.parse_string(text, day_first=day_first)


def _records(text: str) -> list[str]:
    """Every transaction record as a QIF text of its own (with the account block and !Type line it sits under),
    so each can be parsed alone."""
    account: list[str] = []  # the last !Account block, up to and including its ^
    section = ""
    body: list[str] = []
    in_account = False
    out: list[str] = []
    for line in text.split("\n"):
        upper = line.strip().upper()
        if upper.startswith("!ACCOUNT"):
            in_account, account, body = True, [line], []
        elif in_account:
            account.append(line)
            in_account = upper != "^"
        elif upper.startswith("!"):
            section, body = line, []
        elif upper == "^":
            if any(b.strip() for b in body):
                out.append("\n".join([*account, section, *body, "^", ""]))
            body = []
        else:
            body.append(line)
    if any(b.strip() for b in body):
        out.append("\n".join([*account, section, *body, "^", ""]))
    return out


def _transactions(qif):  # type: ignore[no-untyped-def]
    """(transaction, account name) in file order."""
    for name, account in qif.accounts.items():
        label = None if name == "Quiffen Default Account" else clean(name)
        for transactions in account.transactions.values():
            for tx in transactions:
                yield tx, label


_INVEST_TYPE = re.compile(r"(?im)^\s*!Type:Invst\b")
# Investment actions whose total leaves the cash account (Quicken's action codes; the X forms move cash elsewhere)
_OUTFLOW_ACTIONS = frozenset({"buy", "buyx", "miscexp", "miscexpx", "xout", "margint", "margintx", "shtsell"})


def _with_investment_account(text: str) -> str:
    """quiffen reads investment records only under an account block (`!Account ... TInvst`), which exports of a
    single investment account often leave out; one is put before them, named for what it is."""
    first = _INVEST_TYPE.search(text)
    if first is None or "!account" in text[: first.start()].lower():
        return text
    return text[: first.start()] + "!Account\nNInvestment account\nTInvst\n^\n" + text[first.start():]


def _entry(n: int, tx, label: str | None) -> Entry:  # type: ignore[no-untyped-def]
    """A bank, card or cash transaction, or an investment record (its action, security, quantity and price as
    the description; buys and expenses as outflows)."""
    if hasattr(tx, "action"):
        action = clean(tx.action) or ""
        amount = -abs(tx.amount) if action.lower() in _OUTFLOW_ACTIONS else tx.amount
        qty = f"{tx.quantity} @ {tx.price}" if tx.quantity is not None and tx.price is not None else None
        desc = [action, tx.security, qty, tx.memo]
        return Entry(source_row=n, booked=tx.date, amount=amount, account=label, counterparty=None,
                     description=" | ".join(c for x in desc if (c := clean(x))) or None)
    desc = [tx.memo, str(tx.category.name) if tx.category is not None else None]
    return Entry(source_row=n, booked=tx.date, amount=tx.amount, account=label, counterparty=clean(tx.payee),
                 description=" | ".join(c for x in desc if (c := clean(x))) or None)


def read(data: bytes) -> Statement:
    text = decode_candidates(data)[0][1]  # BOM, strict UTF-8, else the first single-byte code page
    text = _canonical_amounts(_with_investment_account(text.replace("\r\n", "\n").replace("\r", "\n")))
    day_first = _day_first(text)
    out = Statement("QIF", "transaction record")
    if day_first:
        out.notes.append("dates read day-first (one of them cannot be month-first)")
    try:
        found = [list(_transactions(_parse(text, day_first)))]
    except Exception:  # quiffen fails the whole file on one bad record: parse record by record to keep the rest
        found = []
        for record in _records(text):
            try:
                found.append(list(_transactions(_parse(record, day_first))))
            except Exception as exc:
                lines = record.split("\n")
                reason = ("QIF record without an amount (no T line)" if not any(ln[:1] in "TU" and ln[1:].strip()
                                                                                  for ln in lines if ln)
                          else f"unreadable QIF record ({type(exc).__name__}: {exc})")
                found.append([(None, reason)])
    for n, (tx, label) in enumerate((item for group in found for item in group), start=1):
        if tx is None:
            out.bad.append((n, label))
        elif tx.date is None or tx.amount is None:
            out.bad.append((n, "QIF transaction without a date (D) or an amount (T)"))
        else:
            out.entries.append(_entry(n, tx, label))
    return require_entries(out)
