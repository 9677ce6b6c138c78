"""E-invoices: the structured XML some PDFs carry (ZUGFeRD 1/2, Factur-X, XRechnung CII; UBL from Odoo and
Peppol tools), read exactly instead of asking the model.

The XML is found among the PDF's attachments with pypdf, by what it is (its root element) rather than by its file
name: `factur-x`'s lookup knows only the standard names and the EmbeddedFiles name tree, and missed e-invoices
attached under other names or listed only in /AF. Reading the header fields out of it is done here with a few
XPath lookups: `factur-x` only extracts and validates, and
`drafthorse` parses ZUGFeRD 2 CII alone (neither ZUGFeRD 1.0 nor UBL), while the handful of header fields the
documents dataset holds sit at the same place in every profile. Lookups go by local name so the ZUGFeRD 1.0
(`urn:ferd:...:1p0`) and CII D16B namespaces read alike.
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import ValidationError
from pypdf import PdfReader

from schemas import DocumentExtraction

PARSER_VERSION = "einvoice-v2"
"""Part of the row id of every row read from XML: a change here is a new row (v2: every UNTDID 1001 invoice and
credit-note code, attachments found through /AF and under any name, credit notes typed as such)."""

MAX_XML_BYTES = 20 * 1024 * 1024
# UNTDID 1001 document name codes that EN 16931 (and so ZUGFeRD, Factur-X, XRechnung, Peppol) allows for invoices
# and for credit notes. A code of neither list (an order, a despatch advice) is not read as an invoice.
CREDIT_NOTE_TYPE_CODES = frozenset({"81", "83", "261", "262", "296", "308", "381", "396", "420", "458", "532"})
INVOICE_TYPE_CODES = frozenset({
    "71", "80", "82", "84", "102", "130", "202", "203", "204", "211", "218", "219", "295", "325", "326", "331",
    "380", "382", "383", "384", "385", "386", "387", "388", "389", "390", "393", "394", "395", "456", "457", "527",
    "553", "575", "623", "633", "751", "780", "817", "870", "875", "876", "877", "935",
}) | CREDIT_NOTE_TYPE_CODES
_ROOTS = ("CrossIndustryInvoice", "CrossIndustryDocument", "Invoice", "CreditNote")


def _root_name(xml: bytes) -> str | None:
    """Local name of the XML's root element (the parse stops at the first element; no entities, no network)."""
    # lazy: only e-invoice XML needs it
    from lxml import etree

    for candidate in (xml, _without_bad_encoding(xml)):
        if candidate is None:
            continue
        try:
            for _, element in etree.iterparse(io.BytesIO(candidate), events=("start",), resolve_entities=False,
                                              no_network=True, load_dtd=False, huge_tree=False):
                return re.sub(r"^\{.*\}", "", str(element.tag))
        except Exception:
            continue
    return None


def is_einvoice_xml(xml: bytes) -> bool:
    """Whether the bytes are a CII or UBL invoice or credit note (by their root element)."""
    return _root_name(xml) in _ROOTS


def _file_specs(reader: Any) -> list[tuple[str, Any]]:
    """(name, file specification) of every embedded file: the EmbeddedFiles name tree (pypdf) and the /AF arrays
    of the catalog and the pages, where PDF/A-3 producers (iText among them) may list the e-invoice only."""
    specs: list[tuple[str, Any]] = []
    holders = [reader.trailer["/Root"]] + list(reader.pages)
    for holder in holders:
        try:
            af = holder.get("/AF")
            for ref in (af.get_object() if af is not None else []):
                spec = ref.get_object()
                specs.append((str(spec.get("/UF") or spec.get("/F") or "attachment"), spec))
        except Exception:  # a broken /AF entry is skipped, the others are still read
            continue
    return specs


def _spec_bytes(spec: Any) -> bytes | None:
    try:
        ef = spec.get("/EF")
        stream = (ef.get("/F") or ef.get("/UF")).get_object()
        return bytes(stream.get_data())
    except Exception:
        return None


def embedded_xml(data: bytes) -> tuple[str, bytes] | None:
    """(attachment name, XML bytes) of the e-invoice a PDF carries, or None. Any attachment whose root element is
    a CII or UBL invoice counts, whatever its file name and whether it sits in the EmbeddedFiles name tree or only
    in an /AF array. Never raises: a PDF whose attachments cannot be read has no e-invoice and goes to the model."""

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            return None
        found: list[tuple[str, bytes]] = []
        try:
            for name, contents in reader.attachments.items():
                found.extend((str(name), bytes(c)) for c in contents)
        except Exception:
            pass
        found.extend((name, b) for name, spec in _file_specs(reader) if (b := _spec_bytes(spec)) is not None)
    except Exception:
        return None
    for name, xml in found:
        if xml and len(xml) <= MAX_XML_BYTES and is_einvoice_xml(xml):
            return name, xml
    return None


def _parse(xml: bytes) -> Any:
    # lazy: only e-invoice XML needs it
    from lxml import etree

    # No entity expansion, no DTD or network fetches: the XML comes from an untrusted PDF.
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        return etree.fromstring(xml, parser=parser)
    except etree.XMLSyntaxError:
        fixed = _without_bad_encoding(xml)
        if fixed is None:
            raise
        return etree.fromstring(fixed, parser=parser)


def _without_bad_encoding(xml: bytes) -> bytes | None:
    """The XML with an unknown `encoding` declaration ("UTF-8_W/O_BOM") dropped when its bytes are valid UTF-8,
    the encoding every e-invoice standard prescribes; None when that does not apply."""
    m = re.match(rb"\s*<\?xml[^>]*?encoding=[\"']([^\"']+)[\"'][^>]*\?>", xml)
    if not m:
        return None
    try:
        "".encode(m.group(1).decode("ascii"))
        return None  # a known encoding: the syntax error is real
    except (LookupError, UnicodeDecodeError):
        pass
    try:
        xml[m.end():].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return b'<?xml version="1.0" encoding="UTF-8"?>' + xml[m.end():]


def _path(*names: str) -> str:
    return "//" + "/".join(f"*[local-name()='{n}']" for n in names)


@dataclass(frozen=True)
class _Read:
    """A value as the XML states it and the element it was read from (lxml's path: the row's provenance)."""

    text: str | None
    path: str | None = None


_NONE = _Read(None)


def _node(node: Any, text: str | None = None) -> _Read:
    value = " ".join((node.text or "").split()) if text is None else text
    return _Read(value or None, node.getroottree().getpath(node))


def _first(root: Any, *paths: str) -> _Read:
    for path in paths:
        for node in root.xpath(path):
            if " ".join((node.text or "").split()):
                return _node(node)
    return _NONE


def _iso_date(value: str | None, fmt: str | None = "102") -> str | None:
    """CII dates are `format="102"` (YYYYMMDD); UBL's are ISO already."""
    if not value:
        return None
    digits = value.replace("-", "")
    if re.fullmatch(r"\d{8}", digits) and fmt in (None, "102"):
        return f"{digits[:4]}-{digits[4:6]}-{digits[6:]}"
    return None


def _amount(value: str | None) -> str | None:
    if not value:
        return None
    try:
        d = Decimal(value.strip())
    except InvalidOperation:
        return None
    if d != d.quantize(Decimal("0.01")):
        return None  # more than cents: not an amount the documents dataset can hold exactly
    return f"{d.quantize(Decimal('0.01'))}"


def _short(value: str | None, limit: int) -> str | None:
    return value[:limit].rstrip() if value else None


def _cii(root: Any) -> dict[str, _Read]:
    doc = ("ExchangedDocument", "HeaderExchangedDocument")
    currency = _first(root, _path("InvoiceCurrencyCode"))
    totals = root.xpath(_path("GrandTotalAmount"))
    # ZUGFeRD 1.0 may state the total once per currency: take the one in the invoice currency.
    total = next((t for t in totals if t.get("currencyID") in (None, currency.text)), None)
    date_nodes = [n for d in doc for n in root.xpath(_path(d, "IssueDateTime", "DateTimeString"))]
    issue = date_nodes[0] if date_nodes else None
    return {
        "type_code": _first(root, *(_path(d, "TypeCode") for d in doc)),
        "issuer": _first(root, _path("SellerTradeParty", "Name")),
        "counterparty": _first(root, _path("BuyerTradeParty", "Name")),
        "reference": _first(root, *(_path(d, "ID") for d in doc)),
        "date": _node(issue, _iso_date(" ".join((issue.text or "").split()), issue.get("format")))
        if issue is not None else _NONE,
        "currency": currency,
        "amount": _node(total, _amount(total.text)) if total is not None else _NONE,
        "account": _first(root, _path("PayeePartyCreditorFinancialAccount", "IBANID"),
                          _path("PayeePartyCreditorFinancialAccount", "ProprietaryID")),
    }


def _ubl(root: Any) -> dict[str, _Read]:
    def child(*names: str) -> str:
        return "/*/" + "/".join(f"*[local-name()='{n}']" for n in names)

    def party(role: str) -> _Read:
        return _first(root, child(role, "Party", "PartyName", "Name"),
                      child(role, "Party", "PartyLegalEntity", "RegistrationName"))

    date = _first(root, child("IssueDate"))
    amount = _first(root, child("LegalMonetaryTotal", "TaxInclusiveAmount"), child("LegalMonetaryTotal", "PayableAmount"))
    return {
        "type_code": _first(root, child("InvoiceTypeCode"), child("CreditNoteTypeCode")),
        "issuer": party("AccountingSupplierParty"),
        "counterparty": party("AccountingCustomerParty"),
        "reference": _first(root, child("ID")),
        "date": _Read(_iso_date(date.text, None), date.path),
        "currency": _first(root, child("DocumentCurrencyCode")),
        "amount": _Read(_amount(amount.text), amount.path),
        "account": _first(root, child("PaymentMeans", "PayeeFinancialAccount", "ID")),
    }


def einvoice_fields(xml: bytes) -> dict[str, Any] | None:
    """The documents dataset's fields read from an e-invoice's XML, or None when it is not an invoice this reader
    understands or lacks a field the schema requires (issuer, date): the document then goes to the model."""
    read = read_einvoice(xml)
    return read[0] if read else None


def read_einvoice(xml: bytes) -> tuple[dict[str, Any], dict[str, str]] | None:
    """`einvoice_fields` and, for each value it holds, the path of the XML element it was read from."""
    try:
        root = _parse(xml)
    except Exception:
        return None
    root_name = re.sub(r"^\{.*\}", "", str(root.tag))
    if root_name in ("CrossIndustryInvoice", "CrossIndustryDocument"):
        read = _cii(root)
    elif root_name in ("Invoice", "CreditNote"):
        read = _ubl(root)
    else:
        return None
    raw = {name: r.text for name, r in read.items()}
    # A CII or UBL invoice message without a type code (invalid, but common in older ZUGFeRD 1 files) is a
    # commercial invoice (380), the default of both standards.
    type_code = (raw.pop("type_code") or "380").strip()
    if type_code not in INVOICE_TYPE_CODES:
        return None
    if not raw.get("issuer") or not raw.get("date"):  # EN 16931 requires both (BT-27, BT-2): incomplete XML
        return None
    account = raw.get("account")
    fields = {
        "doc_type": "credit_note" if type_code in CREDIT_NOTE_TYPE_CODES else "invoice",
        "issuer": _short(raw["issuer"], 80),
        "counterparty": _short(raw["counterparty"], 80),
        "reference": _short(raw["reference"], 40),
        "date": raw["date"],
        "currency": raw["currency"] if raw["currency"] and re.fullmatch(r"[A-Z]{3}", raw["currency"]) else None,
        "amount": raw["amount"],
        "account": re.sub(r"\s", "", account).upper() if account else None,
    }
    valid = _valid(fields)
    if valid is None:
        return None
    paths = {name: read[name].path for name, value in valid.items()
             if name in read and value is not None and read[name].path}
    return valid, paths  # type: ignore[return-value]


def _valid(fields: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return DocumentExtraction.model_validate(fields).model_dump(mode="json")
    except ValidationError:
        if fields.get("account"):  # an account the schema cannot hold is dropped, not the whole invoice
            try:
                return DocumentExtraction.model_validate({**fields, "account": None}).model_dump(mode="json")
            except ValidationError:
                return None
        return None
