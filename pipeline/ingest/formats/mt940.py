"""SWIFT MT940 statements with the mt-940 library; source_row is the line of each entry's :61: tag."""

from __future__ import annotations

import re
from decimal import Decimal

from pipeline.ingest.formats.statement import Entry, Statement, clean, require_entries
from pipeline.ingest.tabular import NotATable, decode_candidates
from pipeline.ingest.text_lines import line_numbers

SUFFIXES = frozenset({".sta", ".mt940", ".940", ".swi"})
_START = re.compile(rb"^\s*(\{1:|:20:|:940:)", re.MULTILINE)
_TAG61 = re.compile(r"^:61:", re.MULTILINE)
# mt-940 splits the German ?NN sub-fields of :86: (applicant_name, purpose); SWIFT's /CODE/value/ form, which
# SEPA banks write (/NAME/Acme SARL/REMI/Invoice 42), it leaves as one string, so the name is taken here.
_SLASH_NAME = re.compile(r"/NAME/([^/]+)")
_CURRENCY_SUFFIX = re.compile(r"^(.*?\d)\s*([A-Z]{3})$")


# SWIFT writes amounts with a decimal comma; some banks (Rabobank's older exports) wrote a point, which the library's
# :61: pattern does not match, so it silently ran such records into their neighbours. The amount fields of the
# entry and balance tags are rewritten with the comma before parsing.
_POINT_AMOUNT_61 = re.compile(r"^(:61:\d{6}(?:\d{4})?R?[DC][A-Z]?\d*)\.(\d{0,2})", re.MULTILINE)
_POINT_AMOUNT_BAL = re.compile(r"^(:6[0245][FM]?:[CD]\d{6}[A-Z]{3}\d*)\.(\d{0,2})", re.MULTILINE)


def _comma_amounts(text: str) -> str:
    return _POINT_AMOUNT_BAL.sub(r"\1,\2", _POINT_AMOUNT_61.sub(r"\1,\2", text))


def sniff(head: bytes) -> bool:
    return bool(_START.search(head[:512])) and b":61:" in head or head.lstrip().startswith(b"{1:")


def _account(value: object) -> str | None:
    """':25:' as printed, less a trailing currency code ('1291.99.348EUR')."""
    s = clean(value)
    if s is None:
        return None
    m = _CURRENCY_SUFFIX.match(s.replace(" ", ""))
    return m.group(1) if m else s


def _relaxed_statement_line():  # type: ignore[no-untyped-def]
    """The :61: tag with the customer reference up to 34 characters: SWIFT caps it at 16, some banks (ASN, Wise)
    write the counter account there, and the library then fails the whole file. Only turns a parse error into a
    parse; a :61: within the spec reads as before."""
    # lazy: one bank format's parser, loaded when such a file appears
    from mt940 import tags

    class Statement(tags.Statement):  # type: ignore[misc, valid-type]  # its name is the slug processors look for
        pattern = tags.Statement.pattern.replace("[^\\n]){0,16})", "[^\\n]){0,34})")

    return Statement()


def read(data: bytes) -> Statement:
    # lazy: one bank format's parser, loaded when such a file appears
    import mt940
    from mt940 import processors

    text = _comma_amounts(decode_candidates(data)[0][1])  # BOM, strict UTF-8, else the first single-byte code page
    defaults = mt940.models.Transactions.DEFAULT_PROCESSORS
    post = [*defaults["post_statement"], processors.transactions_to_transaction("account_identification")]
    parsed = mt940.models.Transactions(processors={"post_statement": post}, tags={61: _relaxed_statement_line()})
    try:
        parsed.parse(text)
    except Exception as exc:  # the library raises ValueError, KeyError, RuntimeError on malformed tags
        raise NotATable(f"unreadable MT940: {type(exc).__name__}: {exc}") from exc
    tag_lines = line_numbers(text, [m.start() for m in _TAG61.finditer(text)])
    if len(tag_lines) != len(parsed.transactions):  # records would be lost, or made up from their neighbours
        raise NotATable(f"the MT940 reader returned {len(parsed.transactions)} entries for the file's "
                        f"{len(tag_lines)} :61: records, so they cannot be told apart")
    out = Statement("MT940", "line of the entry's :61: tag")
    for line, tx in zip(tag_lines, parsed.transactions):
        d = tx.data
        amount = d.get("amount")
        if amount is None or d.get("date") is None:
            out.bad.append((line, "MT940 entry without a date or an amount"))
            continue
        details = d.get("transaction_details")
        name = d.get("applicant_name") or (m.group(1) if details and (m := _SLASH_NAME.search(details)) else None)
        desc = [d.get("posting_text"), d.get("purpose"), details, d.get("extra_details")]
        out.entries.append(Entry(
            source_row=line, booked=d["date"], amount=Decimal(str(amount.amount)), currency=amount.currency,
            account=_account(d.get("account_identification")), counterparty=clean(name),
            description=" | ".join(dict.fromkeys(c for x in desc if (c := clean(x)))) or None))
    return require_entries(out)

