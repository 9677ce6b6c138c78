"""Bank statement and spreadsheet formats (OFX/QFX, QIF, MT940, CAMT, XLSX) on generated files: each file's
transactions, their signs and currencies, and a source_row a user can find in the file."""

from __future__ import annotations

import hashlib
import io
from datetime import date, datetime
from decimal import Decimal

import pytest

from pipeline.ingest.transactions import (
    TransactionFile,
    read_transactions,
    rows_to_table,
)
from tests.helpers.bank_files import OFX1_HEADER


def _read(data: bytes | str, name: str, **kw: object) -> TransactionFile:
    raw = data.encode() if isinstance(data, str) else data
    return read_transactions(raw, name, hashlib.sha256(raw).hexdigest(), **kw)  # type: ignore[arg-type]


def _line_of(text: str, needle: str, occurrence: int = 1) -> int:
    seen = 0
    for n, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return n
    raise AssertionError(needle)


OFX_SGML = OFX1_HEADER + """<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20240331120000<LANGUAGE>ENG</SONRS></SIGNONMSGSRSV1>
<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<STMTRS><CURDEF>EUR
<BANKACCTFROM><BANKID>123456789012<ACCTID>DE89370400440532013000<ACCTTYPE>CHECKING</BANKACCTFROM>
<BANKTRANLIST><DTSTART>20240301<DTEND>20240331
<STMTTRN>
<TRNTYPE>DEBIT
<DTPOSTED>20240305120000
<TRNAMT>-1234.56
<FITID>T-0001
<NAME>Stadtwerke Musterstadt
<MEMO>Abschlag Maerz
</STMTTRN>
<STMTTRN>
<TRNTYPE>CREDIT
<DTPOSTED>20240315
<TRNAMT>2500.00
<FITID>T-0002
<NAME>ACME GmbH
<MEMO>Gehalt
</STMTTRN>
<STMTTRN>
<TRNTYPE>FEE
<DTPOSTED>20240331
<TRNAMT>-4.90
<FITID>T-0003
<NAME>Kontofuehrung
</STMTTRN>
</BANKTRANLIST>
<LEDGERBAL><BALAMT>1260.54<DTASOF>20240331</LEDGERBAL>
</STMTRS></STMTTRNRS></BANKMSGSRSV1>
</OFX>
"""


def test_ofx_statement_rows_with_signs_currency_and_fitid_lines() -> None:
    tf = _read(OFX_SGML, "export.ofx")
    assert not tf.errors and tf.n_records == 3
    assert [r["amount"] for r in tf.rows] == [Decimal("-1234.56"), Decimal("2500.00"), Decimal("-4.90")]
    assert {r["currency"] for r in tf.rows} == {"EUR"}
    assert {r["account"] for r in tf.rows} == {"DE89370400440532013000"}
    assert [r["timestamp"].date() for r in tf.rows] == [date(2024, 3, 5), date(2024, 3, 15), date(2024, 3, 31)]
    assert tf.rows[0]["counterparty"] == "Stadtwerke Musterstadt" and tf.rows[0]["description"] == "Abschlag Maerz"
    assert [r["source_row"] for r in tf.rows] == [_line_of(OFX_SGML, f"<FITID>T-000{i}") for i in (1, 2, 3)]
    assert tf.details["format"] == "OFX"
    rows_to_table(tf.rows)  # the canonical Arrow schema accepts them


def test_qfx_with_an_ofx2_xml_header_reads_the_same() -> None:
    body = OFX_SGML.split("<OFX>", 1)[1]
    xml = ('<?xml version="1.0" encoding="UTF-8"?>\n<?OFX OFXHEADER="200" VERSION="202" SECURITY="NONE" '
           'OLDFILEUID="NONE" NEWFILEUID="NONE"?>\n<OFX>' + body)
    tf = _read(xml, "export.qfx")
    assert not tf.errors and [r["amount"] for r in tf.rows] == [Decimal("-1234.56"), Decimal("2500.00"),
                                                                 Decimal("-4.90")]


def test_ofx2_xml_with_letters_past_ascii_reads_them() -> None:
    """ofxparse reads anything but an SGML-declared encoding as ASCII: an OFX 2 export with an umlaut failed whole."""
    body = OFX_SGML.split("<OFX>", 1)[1].replace("Stadtwerke Musterstadt", "Stadtwerke Müllheim")
    xml = '<?xml version="1.0" encoding="UTF-8"?>\n<?OFX OFXHEADER="200" VERSION="202"?>\n<OFX>' + body
    tf = _read(xml, "export.ofx")
    assert not tf.errors and tf.rows[0]["counterparty"] == "Stadtwerke Müllheim"
    latin = OFX1_HEADER + "<OFX>" + body.replace("ACME GmbH", "Café Noël")
    tf = _read(latin.encode("cp1252"), "export.ofx")  # CHARSET:1252, as the header says
    assert not tf.errors and tf.rows[1]["counterparty"] == "Café Noël"


def test_ofx_with_a_comment_before_its_header_and_self_closed_empty_elements() -> None:
    text = ("<!-- exported by a converter\n-->\n" + OFX_SGML.replace("<DTSTART>20240301<DTEND>20240331",
                                                                    "<DTSTART /><DTEND/>"))
    tf = _read(text, "export.ofx")
    assert not tf.errors and len(tf.rows) == 3
    assert [r["source_row"] for r in tf.rows] == [_line_of(text, f"<FITID>T-000{i}") for i in (1, 2, 3)]


def test_ofx_booking_dates_keep_the_statement_date_whatever_its_zone() -> None:
    text = (OFX_SGML.replace("<DTPOSTED>20240305120000", "<DTPOSTED>20240301000000[+1:CET]")
            .replace("<DTPOSTED>20240315", "<DTPOSTED>20240315235959.000[-5:EST]"))
    tf = _read(text, "export.ofx")
    assert [r["timestamp"].date() for r in tf.rows][:2] == [date(2024, 3, 1), date(2024, 3, 15)]


@pytest.mark.parametrize("text", [
    OFX_SGML,
    OFX_SGML.replace("<OFX>", '<?xml version="1.0"?>\n<?OFX OFXHEADER="200"?>\n<OFX>', 1),
    OFX_SGML.replace("<MEMO>", "<MEMO><![CDATA[a <b> c]]>", 1),
    "OFXHEADER:100\n\n<OFX><SIGNONMSGSRSV1><SONRS><CODE>0<DTSERVER>20240301</SONRS></SIGNONMSGSRSV1><LAST>x",
], ids=["sgml", "xml-header", "cdata", "unclosed-last"])
def test_closing_leaf_tags_first_leaves_ofxparses_own_preprocessing_unchanged(text: str) -> None:
    """`close_leaf_tags` closes the leaves where ofxparse itself would (so the file it then parses is the same),
    in one pass over a set instead of ofxparse's scan of a list per tag."""
    from ofxparse.ofxparse import OfxPreprocessedFile

    from pipeline.ingest.formats.ofx import close_leaf_tags

    def preprocessed(data: bytes) -> str:
        return OfxPreprocessedFile(io.BytesIO(data)).fh.read()

    data = text.encode()
    assert close_leaf_tags(data) != data
    assert preprocessed(close_leaf_tags(data)) == preprocessed(data)


def test_broken_ofx_is_one_file_error() -> None:
    tf = _read("OFXHEADER:100\n<OFX><BANKMSGSRSV1><STMTTRNRS>garbage", "broken.ofx")
    assert not tf.rows and len(tf.errors) == 1
    assert tf.errors[0].unit == "file" and tf.errors[0].error_class == "UnrecognisedTable"


QIF = """!Type:Bank
D16/03/2024
T-1.234,56
PStadtwerke
MAbschlag
LUtilities:Power
^
D01/04/2024
T2.500,00
PACME GmbH
^
D02/04/2024
PNo amount here
^
"""


def test_qif_decimal_comma_day_first_and_currency_only_from_a_hint() -> None:
    without = _read(QIF, "konto.qif")  # QIF states no currency: the rows keep it empty
    assert [r["currency"] for r in without.rows] == [None, None] and without.details["currency_unstated_rows"] == 2
    assert [(e.error_class, "without an amount" in e.message) for e in without.errors] == [("BadRecord", True)]
    tf = _read(QIF, "konto.qif", default_currency="EUR")
    assert [r["amount"] for r in tf.rows] == [Decimal("-1234.56"), Decimal("2500.00")]
    assert [r["timestamp"].date() for r in tf.rows] == [date(2024, 3, 16), date(2024, 4, 1)]
    assert [r["source_row"] for r in tf.rows] == [1, 2]
    assert [e.source_row for e in tf.errors] == [3] and tf.n_records == 3
    assert tf.rows[0]["counterparty"] == "Stadtwerke" and tf.rows[0]["currency"] == "EUR"


def test_qif_us_dates_stay_month_first() -> None:
    tf = _read("!Type:CCard\nD03/04/2024\nT-12.50\nPCafe\n^\n", "card.qif", default_currency="USD")
    assert tf.rows[0]["timestamp"].date() == date(2024, 3, 4) and tf.rows[0]["amount"] == Decimal("-12.50")


MT940 = """{1:F01BANKDEFFXXXX0000000000}
{2:I940BANKDEFFXXXXN}
{4:
:20:STMT-1
:25:DE89370400440532013000
:28C:00001/001
:60F:C240301EUR1000,00
:61:2403050305D123,45NTRFNONREF//B1
:86:166?00SEPA-UEBERWEISUNG?20Rechnung 4711?32MUELLER GMBH
:61:2403060306C2000,00NTRFNONREF//B2
:86:/TRTP/SEPA CREDIT/NAME/ACME SARL/REMI/Salaire mars
:62F:C240306EUR2876,55
-}
{1:F01BANKDEFFXXXX0000000000}
{2:I940BANKDEFFXXXXN}
{4:
:20:STMT-2
:25:1291.99.348USD
:28C:00002/001
:60F:C240301USD50,00
:61:240307D7,50NMSCNONREF
:86:Card fee
:62F:C240307USD42,50
-}
"""


def test_mt940_entries_carry_their_tag_line_account_and_currency() -> None:
    tf = _read(MT940, "statement.sta")
    assert not tf.errors and tf.details["format"] == "MT940"
    assert [r["amount"] for r in tf.rows] == [Decimal("-123.45"), Decimal("2000.00"), Decimal("-7.50")]
    assert [r["currency"] for r in tf.rows] == ["EUR", "EUR", "USD"]
    assert [r["account"] for r in tf.rows] == ["DE89370400440532013000"] * 2 + ["1291.99.348"]
    assert [r["counterparty"] for r in tf.rows] == ["MUELLER GMBH", "ACME SARL", None]
    assert [r["source_row"] for r in tf.rows] == [_line_of(MT940, ":61:", k) for k in (1, 2, 3)]
    assert sum(r["amount"] for r in tf.rows[:2]) == Decimal("2876.55") - Decimal("1000.00")


POINT_MT940 = """:940:
:20:940A030108
:25:1017.490.554EUR
:28:00000/00
:60F:C030107EUR000000020000.00
:61:030109C000000000300.00NMSC170059286
:86:Demo gebruiker
:86:Spaarpot kantine
:61:030109D000000000045.50NMSCNONREF
:86:Contante opname
:62F:C030108EUR000000020254.50
:20:940A030109
:25:1017.490.554EUR
:28:00000/00
:60F:C030108EUR000000020254.50
:61:030110C000000001245.00NMSCNONREF
:86:OVERBOEKING
:62F:C030109EUR000000021499.50
"""


def test_mt940_with_decimal_points_reads_every_record() -> None:
    """Older Rabobank exports write '300.00' where SWIFT has '300,00': the library ran such records together and
    returned one entry for three, and the mismatch was passed over."""
    tf = _read(POINT_MT940, "rabo.sta")
    assert not tf.errors
    assert [(r["amount"], r["source_row"]) for r in tf.rows] == [
        (Decimal("300.0000"), 6), (Decimal("-45.5000"), 9), (Decimal("1245.0000"), 16)]


def test_mt940_records_the_library_cannot_tell_apart_are_one_file_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.ingest.formats import mt940

    monkeypatch.setattr(mt940, "_comma_amounts", lambda text: text)  # the library then merges the records
    tf = _read(POINT_MT940, "rabo.sta")
    assert tf.rows == [] and [e.unit for e in tf.errors] == ["file"]
    assert "for the file's 3 :61: records" in tf.errors[0].message


def test_mt940_saved_as_txt_is_recognised_by_content() -> None:
    tf = _read(MT940, "download.txt")
    assert len(tf.rows) == 3 and tf.details["format"] == "MT940"


CAMT053 = """<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02">
  <BkToCstmrStmt>
    <GrpHdr><MsgId>M1</MsgId><CreDtTm>2024-03-31T18:00:00</CreDtTm></GrpHdr>
    <Stmt>
      <Id>S1</Id>
      <Acct><Id><IBAN>CH9300762011623852957</IBAN></Id><Ccy>CHF</Ccy></Acct>
      <Ntry>
        <Amt Ccy="CHF">150.00</Amt>
        <CdtDbtInd>DBIT</CdtDbtInd>
        <Sts>BOOK</Sts>
        <BookgDt><Dt>2024-03-04</Dt></BookgDt>
        <ValDt><Dt>2024-03-04</Dt></ValDt>
        <AcctSvcrRef>R1</AcctSvcrRef>
        <NtryDtls><TxDtls>
          <RltdPties><Cdtr><Nm>Elektrizitaetswerk AG</Nm></Cdtr></RltdPties>
          <RmtInf><Ustrd>Rechnung 2024-03</Ustrd></RmtInf>
        </TxDtls></NtryDtls>
      </Ntry>
      <Ntry>
        <Amt Ccy="CHF">300.00</Amt>
        <CdtDbtInd>CRDT</CdtDbtInd>
        <Sts>BOOK</Sts>
        <BookgDt><Dt>2024-03-05+01:00</Dt></BookgDt>
        <AcctSvcrRef>R2</AcctSvcrRef>
        <NtryDtls>
          <TxDtls>
            <Amt Ccy="CHF">100.00</Amt>
            <RltdPties><Dbtr><Nm>Kunde Eins</Nm></Dbtr></RltdPties>
          </TxDtls>
          <TxDtls>
            <Amt Ccy="CHF">200.00</Amt>
            <RltdPties><Dbtr><Nm>Kunde Zwei</Nm></Dbtr></RltdPties>
          </TxDtls>
        </NtryDtls>
      </Ntry>
    </Stmt>
  </BkToCstmrStmt>
</Document>
"""


def test_camt053_signs_batch_split_and_xml_lines() -> None:
    tf = _read(CAMT053, "stmt.xml")
    assert not tf.errors and tf.details["format"].startswith("CAMT")
    assert [r["amount"] for r in tf.rows] == [Decimal("-150.00"), Decimal("100.00"), Decimal("200.00")]
    assert [r["counterparty"] for r in tf.rows] == ["Elektrizitaetswerk AG", "Kunde Eins", "Kunde Zwei"]
    assert {r["account"] for r in tf.rows} == {"CH9300762011623852957"} and {r["currency"] for r in tf.rows} == {"CHF"}
    assert [r["timestamp"].date() for r in tf.rows] == [date(2024, 3, 4), date(2024, 3, 5), date(2024, 3, 5)]
    first_detail = _line_of(CAMT053, "<TxDtls>", 2)
    assert [r["source_row"] for r in tf.rows] == [_line_of(CAMT053, "<Ntry>", 1), first_detail,
                                                  _line_of(CAMT053, "<TxDtls>", 3)]


def test_camt054_notification_is_read() -> None:
    xml = (CAMT053.replace("camt.053.001.02", "camt.054.001.02").replace("BkToCstmrStmt", "BkToCstmrDbtCdtNtfctn")
           .replace("<Stmt>", "<Ntfctn>").replace("</Stmt>", "</Ntfctn>"))
    tf = _read(xml, "notice.xml")
    assert len(tf.rows) == 3 and not tf.errors


def test_xml_that_is_not_camt_is_one_file_error() -> None:
    tf = _read('<?xml version="1.0"?><catalog><book id="1"/></catalog>', "books.xml")
    assert not tf.rows and [e.error_class for e in tf.errors] == ["UnrecognisedTable"]


def test_camt_entities_are_not_expanded() -> None:
    evil = CAMT053.replace('<?xml version="1.0" encoding="UTF-8"?>',
                           '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>')
    evil = evil.replace("Rechnung 2024-03", "&x;")
    tf = _read(evil, "evil.xml")
    assert all("root:" not in (r["description"] or "") for r in tf.rows)


def _xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def test_xlsx_with_preamble_typed_cells_and_row_numbers() -> None:
    data = _xlsx({"Umsaetze": [
        ["Kontoauszug DE89370400440532013000"],
        [],
        ["Buchungstag", "Empfaenger", "Verwendungszweck", "Betrag", "Waehrung"],
        [datetime(2024, 3, 5), "Stadtwerke", "Abschlag", -1234.56, "EUR"],
        [datetime(2024, 3, 15), "ACME GmbH", "Gehalt", 2500, "EUR"],
        ["kein Datum", "x", "y", 1, "EUR"],
    ]})
    tf = _read(data, "umsaetze.xlsx")
    assert [r["amount"] for r in tf.rows] == [Decimal("-1234.56"), Decimal("2500")]
    assert [r["source_row"] for r in tf.rows] == [4, 5] and [e.source_row for e in tf.errors] == [6]
    assert [r["timestamp"].date() for r in tf.rows] == [date(2024, 3, 5), date(2024, 3, 15)]
    assert tf.rows[0]["counterparty"] == "Stadtwerke" and tf.n_records == 3


def test_xlsx_with_two_transaction_sheets_keeps_both_with_distinct_rows() -> None:
    header = ["Date", "Description", "Amount", "Currency"]
    data = _xlsx({"Jan": [header, [datetime(2024, 1, 3), "a", -1.5, "GBP"]],
                  "Feb": [header, [datetime(2024, 2, 3), "b", 2.25, "GBP"]],
                  "Notes": [["just text"]]})
    tf = _read(data, "book.xlsx")
    assert [r["amount"] for r in tf.rows] == [Decimal("-1.5"), Decimal("2.25")]
    assert [r["source_row"] for r in tf.rows] == [1_000_002, 2_000_002]
    assert len({r["source_row"] for r in tf.rows}) == 2


def test_not_a_workbook_is_one_file_error() -> None:
    tf = _read(b"PK\x03\x04not really a zip", "broken.xlsx")
    assert not tf.rows and [e.error_class for e in tf.errors] == ["UnrecognisedTable"]


def test_currency_from_a_valid_iban_country_with_the_reason_recorded() -> None:
    csv = "Datum;Bedrag;Rekening;Omschrijving\n2024-03-01;-12,50;NL91ABNA0417164300;Koffie\n"
    tf = _read(csv, "bunq.csv")
    assert [r["currency"] for r in tf.rows] == ["EUR"] and tf.details["currency_from_iban_country"] == 1
    bad_iban = csv.replace("NL91ABNA0417164300", "NL00ABNA0417164300")
    unread = _read(bad_iban, "bunq.csv")  # an invalid IBAN names no country: no currency, none guessed
    assert not unread.errors and [r["currency"] for r in unread.rows] == [None]


def test_totals_line_is_a_summary_row_error() -> None:
    csv = 'Date,Description,Amount\n04/27/2023,Buy,"-$3,320.05"\nTransactions Total,,"-$3,320.05"\n'
    tf = _read(csv, "schwab.csv")
    assert len(tf.rows) == 1 and [e.error_class for e in tf.errors] == ["SummaryRow"]


def test_legacy_xls_is_read() -> None:
    xlwt = pytest.importorskip("xlwt")
    book = xlwt.Workbook()
    sheet = book.add_sheet("Umsaetze")
    dates = xlwt.easyxf(num_format_str="DD.MM.YYYY")
    for c, name in enumerate(["Buchungstag", "Verwendungszweck", "Betrag", "Waehrung"]):
        sheet.write(0, c, name)
    sheet.write(1, 0, datetime(2024, 3, 5), dates)
    sheet.write(1, 1, "Miete")
    sheet.write(1, 2, -950.0)
    sheet.write(1, 3, "EUR")
    buf = io.BytesIO()
    book.save(buf)
    tf = _read(buf.getvalue(), "konto.xls")
    assert [(r["timestamp"].date(), r["amount"], r["currency"], r["source_row"]) for r in tf.rows] == [
        (date(2024, 3, 5), Decimal("-950"), "EUR", 2)]


def test_opendocument_spreadsheet_is_read() -> None:
    pytest.importorskip("odf")
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    doc = OpenDocumentSpreadsheet()
    table = Table(name="Movimientos")
    for cells in (["Fecha", "Concepto", "Importe", "Divisa"], [("date", "2024-03-05"), "Alquiler", ("float", "-950.5"),
                                                                 "EUR"]):
        row = TableRow()
        for cell in cells:
            if isinstance(cell, tuple):
                kind, value = cell
                attrs = {"datevalue": value} if kind == "date" else {"value": value}
                c = TableCell(valuetype=kind, **attrs)
                c.addElement(P(text=value))
            else:
                c = TableCell(valuetype="string")
                c.addElement(P(text=cell))
            row.addElement(c)
        table.addElement(row)
    doc.spreadsheet.addElement(table)
    buf = io.BytesIO()
    doc.write(buf)
    tf = _read(buf.getvalue(), "movimientos.ods")
    assert [(r["timestamp"].date(), r["amount"], r["description"]) for r in tf.rows] == [
        (date(2024, 3, 5), Decimal("-950.5"), "Alquiler")]
