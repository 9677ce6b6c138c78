"""ISO 20022 CAMT.052 / .053 / .054 account reports, statements and notifications with pycamt.

pycamt parses each entry (<Ntry>) and splits batch entries into their <TxDtls>; it looks for <Stmt> and <Rpt>
only, so the subclass adds camt.054's <Ntfctn>. Its XML parser neither expands entities nor reaches the network.
source_row is the XML line of the entry, or of the transaction detail for a split batch entry.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

from pipeline.ingest.formats.statement import Entry, Statement, clean, require_entries
from pipeline.ingest.tabular import NotATable

SUFFIXES = frozenset({".xml", ".camt", ".053", ".052", ".054"})
_NAMESPACE = re.compile(rb"urn:iso:std:iso:20022:tech:xsd:camt\.05[234]")
_ROOT_TAG = re.compile(rb"<(?![?!])([\w:.-]+)")
_CONTAINERS = ("}Stmt", "}Rpt", "}Ntfctn")  # a statement, report or notification element (namespaced tag)


def sniff(head: bytes) -> bool:
    return bool(_NAMESPACE.search(head[:4096]))


def _when(value: str | None) -> date | datetime | None:
    """'2017-04-01', '2017-04-01+02:00' (a date with its zone: the date is what the bank booked) or a DtTm."""
    if not value:
        return None
    v = value.strip()
    if "T" in v:
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    return date.fromisoformat(v[:10])


def read(data: bytes) -> Statement:
    # lazy: one bank format's parser, loaded when such a file appears
    from pycamt.parser import Camt053Parser

    class _CamtParser(Camt053Parser):
        # pycamt (1.x) looks the statement's IBAN up again for every entry with a `.//` search over the whole
        # statement: quadratic in the entries (a 2 MiB statement took 16 s). A statement-level answer is the
        # same for all its entries, so it is looked up once.
        def _find_text(self, element, xpath):  # type: ignore[no-untyped-def]
            if element is None or not str(element.tag).endswith(_CONTAINERS):
                return super()._find_text(element, xpath)
            found: dict[tuple[int, str], str | None] = self.__dict__.setdefault("_statement_texts", {})
            key = (id(element), xpath)  # the parser's tree keeps the element alive as long as the parser
            if key not in found:
                found[key] = super()._find_text(element, xpath)
            return found[key]

        def _find_statements_or_reports(self):  # type: ignore[no-untyped-def]
            for path in (".//Stmt", ".//Rpt", ".//Ntfctn"):
                found = self.tree.findall(path, self.namespaces)
                if found:
                    return found
            raise NotATable("CAMT document without <Stmt>, <Rpt> or <Ntfctn>")

    if not sniff(data[:4096]):
        root = _ROOT_TAG.search(data[:4096])
        raise NotATable("XML that is not an ISO 20022 CAMT statement"
                        + (f" (root element <{root.group(1).decode(errors='replace')}>)" if root else "")
                        + "; e-invoice XML is read from the PDF that embeds it")
    try:
        parser = _CamtParser(data)
        containers = parser._find_statements_or_reports()
    except NotATable:
        raise
    except Exception as exc:  # lxml XMLSyntaxError and pycamt's own errors
        raise NotATable(f"unreadable CAMT XML: {type(exc).__name__}: {exc}") from exc
    ns = parser.namespaces
    out = Statement(f"CAMT ({parser.version})" if parser.version != "unknown" else "CAMT", "XML line of the entry")
    for container in containers:
        account = (parser._find_text(container, ".//Acct//Id//IBAN")
                   or parser._find_text(container, ".//Acct//Id//Othr//Id"))
        account_ccy = parser._find_text(container, ".//Acct//Ccy")
        for entry in container.findall(".//Ntry", ns):
            details = [d for nd in entry.findall(".//NtryDtls", ns) for d in nd.findall(".//TxDtls", ns)]
            records = parser._extract_transaction(entry, container)
            lines = [d.sourceline for d in details] if len(details) == len(records) and len(details) > 1 \
                else [entry.sourceline]
            for line, rec in zip(lines, records):
                try:
                    amount = Decimal(str(rec.get("Amount")))
                    when = _when(rec.get("BookingDate")) or _when(rec.get("ValueDate"))
                except (InvalidOperation, ValueError) as exc:
                    out.bad.append((line, f"CAMT entry with an unreadable amount or date: {exc}"))
                    continue
                if when is None:
                    out.bad.append((line, "CAMT entry without a booking or value date"))
                    continue
                debit = rec.get("CreditDebitIndicator") == "DBIT"
                cp = rec.get("CreditorName") if debit else rec.get("DebtorName")
                desc = [rec.get("RemittanceInformationFull") or rec.get("RemittanceInformation"),
                        rec.get("AdditionalEntryInformation"), rec.get("AdditionalRemittanceInformation")]
                out.entries.append(Entry(
                    source_row=int(line or 0), booked=when, amount=-abs(amount) if debit else abs(amount),
                    currency=rec.get("Currency") or account_ccy, account=clean(account), counterparty=clean(cp),
                    description=" | ".join(dict.fromkeys(c for x in desc if (c := clean(x)))) or None))
    return require_entries(out)
