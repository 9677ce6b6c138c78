"""Generated e-invoice fixtures: CII (Factur-X / ZUGFeRD 2), ZUGFeRD 1.0 and UBL XML, embedded in a PDF the way
e-invoicing tools attach them (an embedded file named as each standard says)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.pipeline_inputs import make_pdf

SELLER, BUYER = "Nordwind Handels GmbH", "Blaubeer Logistik AG"
NUMBER, TOTAL, IBAN = "RE-2024/0815", "1190.00", "DE89370400440532013000"

CII = f"""<?xml version="1.0" encoding="UTF-8"?>
<rsm:CrossIndustryInvoice xmlns:rsm="urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"
 xmlns:ram="urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100"
 xmlns:udt="urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100">
 <rsm:ExchangedDocumentContext><ram:GuidelineSpecifiedDocumentContextParameter>
  <ram:ID>urn:factur-x.eu:1p0:minimum</ram:ID></ram:GuidelineSpecifiedDocumentContextParameter>
 </rsm:ExchangedDocumentContext>
 <rsm:ExchangedDocument><ram:ID>{NUMBER}</ram:ID><ram:TypeCode>380</ram:TypeCode>
  <ram:IssueDateTime><udt:DateTimeString format="102">20240305</udt:DateTimeString></ram:IssueDateTime>
 </rsm:ExchangedDocument>
 <rsm:SupplyChainTradeTransaction>
  <ram:ApplicableHeaderTradeAgreement>
   <ram:SellerTradeParty><ram:Name>{SELLER}</ram:Name></ram:SellerTradeParty>
   <ram:BuyerTradeParty><ram:Name>{BUYER}</ram:Name></ram:BuyerTradeParty>
  </ram:ApplicableHeaderTradeAgreement>
  <ram:ApplicableHeaderTradeDelivery/>
  <ram:ApplicableHeaderTradeSettlement>
   <ram:InvoiceCurrencyCode>EUR</ram:InvoiceCurrencyCode>
   <ram:SpecifiedTradeSettlementPaymentMeans><ram:TypeCode>58</ram:TypeCode>
    <ram:PayeePartyCreditorFinancialAccount><ram:IBANID>{IBAN}</ram:IBANID></ram:PayeePartyCreditorFinancialAccount>
   </ram:SpecifiedTradeSettlementPaymentMeans>
   <ram:SpecifiedTradeSettlementHeaderMonetarySummation>
    <ram:TaxBasisTotalAmount>1000.00</ram:TaxBasisTotalAmount>
    <ram:TaxTotalAmount currencyID="EUR">190.00</ram:TaxTotalAmount>
    <ram:GrandTotalAmount>{TOTAL}</ram:GrandTotalAmount>
    <ram:DuePayableAmount>{TOTAL}</ram:DuePayableAmount>
   </ram:SpecifiedTradeSettlementHeaderMonetarySummation>
  </ram:ApplicableHeaderTradeSettlement>
 </rsm:SupplyChainTradeTransaction>
</rsm:CrossIndustryInvoice>
"""

ZUGFERD1 = f"""<?xml version="1.0" encoding="UTF-8"?>
<rsm:CrossIndustryDocument xmlns:rsm="urn:ferd:CrossIndustryDocument:invoice:1p0"
 xmlns:ram="urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:12"
 xmlns:udt="urn:un:unece:uncefact:data:standard:UnqualifiedDataType:15">
 <rsm:SpecifiedExchangedDocumentContext><ram:GuidelineSpecifiedDocumentContextParameter>
  <ram:ID>urn:ferd:CrossIndustryDocument:invoice:1p0:basic</ram:ID></ram:GuidelineSpecifiedDocumentContextParameter>
 </rsm:SpecifiedExchangedDocumentContext>
 <rsm:HeaderExchangedDocument><ram:ID>{NUMBER}</ram:ID><ram:TypeCode>380</ram:TypeCode>
  <ram:IssueDateTime><udt:DateTimeString format="102">20240305</udt:DateTimeString></ram:IssueDateTime>
 </rsm:HeaderExchangedDocument>
 <rsm:SpecifiedSupplyChainTradeTransaction>
  <ram:ApplicableSupplyChainTradeAgreement>
   <ram:SellerTradeParty><ram:Name>{SELLER}</ram:Name></ram:SellerTradeParty>
   <ram:BuyerTradeParty><ram:Name>{BUYER}</ram:Name></ram:BuyerTradeParty>
  </ram:ApplicableSupplyChainTradeAgreement>
  <ram:ApplicableSupplyChainTradeSettlement>
   <ram:InvoiceCurrencyCode>EUR</ram:InvoiceCurrencyCode>
   <ram:SpecifiedTradeSettlementPaymentMeans><ram:TypeCode>31</ram:TypeCode>
    <ram:PayeePartyCreditorFinancialAccount><ram:IBANID>{IBAN}</ram:IBANID></ram:PayeePartyCreditorFinancialAccount>
   </ram:SpecifiedTradeSettlementPaymentMeans>
   <ram:SpecifiedTradeSettlementMonetarySummation>
    <ram:GrandTotalAmount currencyID="CHF">1300.00</ram:GrandTotalAmount>
    <ram:GrandTotalAmount currencyID="EUR">{TOTAL}</ram:GrandTotalAmount>
   </ram:SpecifiedTradeSettlementMonetarySummation>
  </ram:ApplicableSupplyChainTradeSettlement>
 </rsm:SpecifiedSupplyChainTradeTransaction>
</rsm:CrossIndustryDocument>
"""

UBL = f"""<?xml version="1.0" encoding="UTF-8"?>
<Invoice xmlns="urn:oasis:names:specification:ubl:schema:xsd:Invoice-2"
 xmlns:cac="urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
 xmlns:cbc="urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2">
 <cbc:UBLVersionID>2.1</cbc:UBLVersionID>
 <cbc:ID>{NUMBER}</cbc:ID><cbc:IssueDate>2024-03-05</cbc:IssueDate><cbc:InvoiceTypeCode>380</cbc:InvoiceTypeCode>
 <cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>
 <cac:AccountingSupplierParty><cac:Party><cac:PartyName><cbc:Name>{SELLER}</cbc:Name></cac:PartyName></cac:Party>
 </cac:AccountingSupplierParty>
 <cac:AccountingCustomerParty><cac:Party><cac:PartyName><cbc:Name>{BUYER}</cbc:Name></cac:PartyName></cac:Party>
 </cac:AccountingCustomerParty>
 <cac:PaymentMeans><cbc:PaymentMeansCode>30</cbc:PaymentMeansCode>
  <cac:PayeeFinancialAccount><cbc:ID>{IBAN}</cbc:ID></cac:PayeeFinancialAccount></cac:PaymentMeans>
 <cac:LegalMonetaryTotal><cbc:TaxExclusiveAmount currencyID="EUR">1000.00</cbc:TaxExclusiveAmount>
  <cbc:TaxInclusiveAmount currencyID="EUR">{TOTAL}</cbc:TaxInclusiveAmount>
  <cbc:PayableAmount currencyID="EUR">{TOTAL}</cbc:PayableAmount></cac:LegalMonetaryTotal>
</Invoice>
"""

EXPECTED = {"doc_type": "invoice", "issuer": SELLER, "counterparty": BUYER, "reference": NUMBER,
            "date": "2024-03-05", "currency": "EUR", "amount": TOTAL, "account": IBAN}

VISIBLE_TEXT = (f"Rechnung {NUMBER}\nRechnungsdatum 5. März 2024\n{SELLER}\nan {BUYER}\n"
                f"Gesamtbetrag 1.190,00 EUR\nIBAN DE89 3704 0044 0532 0130 00")


def einvoice_pdf(path: Path, xml: str, name: str = "factur-x.xml", text: str = VISIBLE_TEXT) -> Path:
    """A one-page PDF printing `text` with `xml` attached as `name`."""
    from pypdf import PdfReader, PdfWriter

    plain = make_pdf(path.with_suffix(".plain.pdf"), [text])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.add_attachment(name, xml.encode("utf-8"))
    with open(path, "wb") as fh:
        writer.write(fh)
    plain.unlink()
    return path


def af_only_pdf(path: Path, xml: str, name: str = "invoice-data.xml", text: str = VISIBLE_TEXT) -> Path:
    """A PDF/A-3 style hybrid whose XML is listed only in the catalog's /AF array (no EmbeddedFiles name tree),
    under a name no standard prescribes: how some producers (iText among them) attach it."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, TextStringObject

    plain = make_pdf(path.with_suffix(".plain.pdf"), [text])
    writer = PdfWriter(clone_from=PdfReader(plain))
    stream = DecodedStreamObject()
    stream.set_data(xml.encode("utf-8"))
    stream[NameObject("/Type")] = NameObject("/EmbeddedFile")
    spec = DictionaryObject({NameObject("/Type"): NameObject("/Filespec"), NameObject("/F"): TextStringObject(name),
                             NameObject("/AFRelationship"): NameObject("/Data"),
                             NameObject("/EF"): DictionaryObject({NameObject("/F"): writer._add_object(stream)})})
    writer._root_object[NameObject("/AF")] = ArrayObject([writer._add_object(spec)])
    with open(path, "wb") as fh:
        writer.write(fh)
    plain.unlink()
    return path
