"""E-invoices: the structured XML some PDFs carry (ZUGFeRD 1/2, Factur-X, XRechnung CII; UBL from Odoo and
Peppol tools), read exactly instead of asking the model.

The `factur-x` library finds the XML among the PDF's attachments and checks that it is an invoice flavour. Reading
the header fields out of it is done here with a few XPath lookups: `factur-x` only extracts and validates, and
`drafthorse` parses ZUGFeRD 2 CII alone (neither ZUGFeRD 1.0 nor UBL), while the handful of header fields the
documents dataset holds sit at the same place in every profile. Lookups go by local name so the ZUGFeRD 1.0
(`urn:ferd:...:1p0`) and CII D16B namespaces read alike.
"""

from __future__ import annotations

import io
import logging
import re
from decimal import Decimal, InvalidOperation
from typing import Any

PARSER_VERSION = "einvoice-v1"
"""Part of the row id of every row read from XML: a change here is a new row."""

MAX_XML_BYTES = 20 * 1024 * 1024
# UNTDID 1001 document codes that are invoices in the documents dataset's taxonomy: commercial (380), credit note
# (381), corrected (384), self-billed (389), prepayment (386), partial (326), and 751 (invoice information).
INVOICE_TYPE_CODES = {"380", "381", "384", "386", "389", "326", "751", "875", "876", "877"}


def embedded_xml(data: bytes) -> tuple[str, bytes] | None:
    """(attachment name, XML bytes) of the e-invoice a PDF carries, or None. Never raises: a PDF whose attachments
    cannot be read simply has no e-invoice and goes to the model."""
    try:
        from facturx import get_xml_from_pdf
    except ImportError:  # pragma: no cover - factur-x is a core dependency
        return None
    logging.getLogger("facturx").setLevel(logging.ERROR)
    try:
        name, xml = get_xml_from_pdf(io.BytesIO(data), check_xsd=False)
    except Exception:
        return None
    if not xml or len(xml) > MAX_XML_BYTES:
        return None
    return str(name), bytes(xml)


def _parse(xml: bytes) -> Any:
    from lxml import etree

    # No entity expansion, no DTD or network fetches: the XML comes from an untrusted PDF.
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    return etree.fromstring(xml, parser=parser)


def _path(*names: str) -> str:
    return "//" + "/".join(f"*[local-name()='{n}']" for n in names)


def _first(root: Any, *paths: str) -> str | None:
    for path in paths:
        for node in root.xpath(path):
            text = " ".join((node.text or "").split())
            if text:
                return text
    return None


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


def _cii(root: Any) -> dict[str, Any]:
    doc = ("ExchangedDocument", "HeaderExchangedDocument")
    currency = _first(root, _path("InvoiceCurrencyCode"))
    totals = root.xpath(_path("GrandTotalAmount"))
    # ZUGFeRD 1.0 may state the total once per currency: take the one in the invoice currency.
    total = next((t.text for t in totals if t.get("currencyID") in (None, currency)), None)
    date_nodes = [n for d in doc for n in root.xpath(_path(d, "IssueDateTime", "DateTimeString"))]
    issue = _iso_date(" ".join((date_nodes[0].text or "").split()), date_nodes[0].get("format")) if date_nodes else None
    return {
        "type_code": _first(root, *(_path(d, "TypeCode") for d in doc)),
        "issuer": _first(root, _path("SellerTradeParty", "Name")),
        "counterparty": _first(root, _path("BuyerTradeParty", "Name")),
        "reference": _first(root, *(_path(d, "ID") for d in doc)),
        "date": issue,
        "currency": currency,
        "amount": _amount(total),
        "account": _first(root, _path("PayeePartyCreditorFinancialAccount", "IBANID"),
                          _path("PayeePartyCreditorFinancialAccount", "ProprietaryID")),
    }


def _ubl(root: Any) -> dict[str, Any]:
    def child(*names: str) -> str:
        return "/*/" + "/".join(f"*[local-name()='{n}']" for n in names)

    def party(role: str) -> str | None:
        return _first(root, child(role, "Party", "PartyName", "Name"),
                      child(role, "Party", "PartyLegalEntity", "RegistrationName"))

    return {
        "type_code": _first(root, child("InvoiceTypeCode"), child("CreditNoteTypeCode")) or "380",
        "issuer": party("AccountingSupplierParty"),
        "counterparty": party("AccountingCustomerParty"),
        "reference": _first(root, child("ID")),
        "date": _iso_date(_first(root, child("IssueDate")), None),
        "currency": _first(root, child("DocumentCurrencyCode")),
        "amount": _amount(_first(root, child("LegalMonetaryTotal", "TaxInclusiveAmount"),
                                 child("LegalMonetaryTotal", "PayableAmount"))),
        "account": _first(root, child("PaymentMeans", "PayeeFinancialAccount", "ID")),
    }


def einvoice_fields(xml: bytes) -> dict[str, Any] | None:
    """The documents dataset's fields read from an e-invoice's XML, or None when it is not an invoice this reader
    understands or lacks a field the schema requires (issuer, date): the document then goes to the model."""
    from pydantic import ValidationError

    from schemas import DocumentExtraction

    try:
        root = _parse(xml)
    except Exception:
        return None
    root_name = re.sub(r"^\{.*\}", "", str(root.tag))
    if root_name in ("CrossIndustryInvoice", "CrossIndustryDocument"):
        raw = _cii(root)
    elif root_name in ("Invoice", "CreditNote"):
        raw = _ubl(root)
    else:
        return None
    if raw.pop("type_code") not in INVOICE_TYPE_CODES:
        return None
    account = raw.get("account")
    fields = {
        "doc_type": "invoice",
        "issuer": _short(raw["issuer"], 80),
        "counterparty": _short(raw["counterparty"], 80),
        "reference": _short(raw["reference"], 40),
        "date": raw["date"],
        "currency": raw["currency"] if raw["currency"] and re.fullmatch(r"[A-Z]{3}", raw["currency"]) else None,
        "amount": raw["amount"],
        "account": re.sub(r"\s", "", account).upper() if account else None,
    }
    try:
        return DocumentExtraction.model_validate(fields).model_dump(mode="json")
    except ValidationError:
        if fields.get("account"):  # an account the schema cannot hold is dropped, not the whole invoice
            try:
                return DocumentExtraction.model_validate({**fields, "account": None}).model_dump(mode="json")
            except ValidationError:
                return None
        return None
