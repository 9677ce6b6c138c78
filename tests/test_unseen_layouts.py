"""Bank exports from banks nobody wrote a profile for (issue 39): column roles read from the cells when the
header's names are unknown, the encodings such exports come in, and the shapes other readers choke on (HTML
saved as .xls, nested JSON, OFX with empty tags, QIF investment accounts, logs whose suffix lies)."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.ingest.discover import file_kind
from pipeline.ingest.transactions import TransactionFile, read_transactions
from tests.helpers.bank_files import OFX1_HEADER


def _read(data: bytes | str, name: str, **kw: object) -> TransactionFile:
    raw = data.encode() if isinstance(data, str) else data
    return read_transactions(raw, name, hashlib.sha256(raw).hexdigest(), **kw)  # type: ignore[arg-type]


def _amounts(tf: TransactionFile) -> list[Decimal]:
    return [r["amount"] for r in tf.rows]


# ------------------------------------------------------------------ roles from the cells

HU = ("Tranzakció dátuma,Partner neve,Tranzakció összege,Tranzakció devizaneme,Közlemény\n"
      "2019.04.19.,Bolt Kft,-350,HUF,kártya\n2019.04.17.,Munkaadó Zrt,1290,HUF,bér\n")


def test_currency_column_found_by_its_values_when_its_name_is_unknown() -> None:
    tf = _read(HU, "export.csv")
    assert not tf.errors
    assert [(r["currency"], r["amount"]) for r in tf.rows] == [("HUF", Decimal("-350")), ("HUF", Decimal("1290"))]


GREEK = ("Ημερομηνία;Περιγραφή;Ποσό;Υπόλοιπο;Νόμισμα\n"
         "01/02/2024;Πληρωμή ΔΕΗ;-45,20;954,80;EUR\n"
         "03/02/2024;Μισθός;1200,00;2154,80;EUR\n"
         "13/02/2024;Σούπερ μάρκετ;-54,80;2100,00;EUR\n")


def test_greek_cp1253_export_with_an_unknown_header_reads_right() -> None:
    tf = _read(GREEK.encode("cp1253"), "kinhseis.csv")
    assert not tf.errors
    assert _amounts(tf) == [Decimal("-45.20"), Decimal("1200.00"), Decimal("-54.80")]  # not the balance column
    assert tf.rows[0]["description"] == "Πληρωμή ΔΕΗ"  # decoded, not mojibake
    assert tf.rows[2]["timestamp"] == datetime(2024, 2, 13, tzinfo=timezone.utc)
    assert tf.details["encoding"] == "cp1253"


JAPANESE = ("日付,摘要,金額,残高,通貨\n2024/01/05,コンビニ,-540,99460,JPY\n2024/01/06,給与,250000,349460,JPY\n"
            "2024/01/09,電気代,-7200,342260,JPY\n")


@pytest.mark.parametrize("encoding", ["shift_jis", "utf-16-le", "utf-16-be", "utf-16"])
def test_japanese_export_in_shift_jis_and_utf16_with_and_without_bom(encoding: str) -> None:
    tf = _read(JAPANESE.encode(encoding), "meisai.csv")
    assert not tf.errors, tf.errors
    assert [(r["description"], r["amount"], r["currency"]) for r in tf.rows] == [
        ("コンビニ", Decimal("-540"), "JPY"), ("給与", Decimal("250000"), "JPY"), ("電気代", Decimal("-7200"), "JPY")]


def test_balance_column_is_told_from_the_amount_by_running_continuity() -> None:
    # Both numeric columns have cents; only one of them is the running balance of the other.
    text = ("Kuupäev;Saaja;Jääk;Summa;Valuuta\n"
            "02.01.2024;Rimi;1000,00;-12,40;EUR\n02.01.2024;Bolt;987,60;-7,10;EUR\n"
            "03.01.2024;Palk;980,50;2500,00;EUR\n")
    tf = _read(text, "valjavote.csv")
    assert _amounts(tf) == [Decimal("-12.40"), Decimal("-7.10"), Decimal("2500.00")]


def test_undecodable_bytes_are_an_error_not_a_silent_misdecode() -> None:
    raw = bytes(range(128, 256)) * 40
    tf = _read(raw, "garbage.csv")
    assert not tf.rows and tf.errors[0].error_class in ("UnrecognisedTable", "EmptyTable")


# ------------------------------------------------------------------ shapes other readers choke on

OFX_EMPTY_TAGS = OFX1_HEADER + """<OFX><SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20240301<LANGUAGE>ENG
<FI><ORG><FID></FI></SONRS></SIGNONMSGSRSV1>
<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<STMTRS><CURDEF>EUR<BANKACCTFROM><BANKID>1234<ACCTID>998877<ACCTTYPE>CHECKING</BANKACCTFROM>
<BANKTRANLIST><DTSTART>20240201<DTEND>20240229
<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240205<TRNAMT>-12.50<FITID>A1<NAME>Cafe<MEMO></STMTTRN>
<STMTTRN><TRNTYPE>CREDIT<DTPOSTED>20240210<TRNAMT>100.00<FITID>A2<NAME><MEMO>Refund</STMTTRN>
</BANKTRANLIST><LEDGERBAL><BALAMT>87.50<DTASOF>20240229</LEDGERBAL></STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>
"""


def test_ofx_1_with_empty_tags_reads() -> None:
    tf = _read(OFX_EMPTY_TAGS, "export.ofx")
    assert not tf.errors, tf.errors
    assert _amounts(tf) == [Decimal("-12.50"), Decimal("100.00")]
    assert tf.rows[0]["currency"] == "EUR"


def test_ofx_record_without_a_date_costs_only_its_own_row() -> None:
    broken = OFX_EMPTY_TAGS.replace("<DTPOSTED>20240205", "").replace("<LEDGERBAL><BALAMT>87.50", "<LEDGERBAL><BALAMT>")
    tf = _read(broken, "export.ofx")
    assert _amounts(tf) == [Decimal("100.00")]
    assert len(tf.errors) == 1 and "date" in tf.errors[0].message.lower()
    assert tf.n_records == 2


HTML_XLS = """<html><head><meta charset="utf-8"></head><body>
<table><tr><td>Sąskaitos išrašas</td></tr></table>
<table border="1">
<tr><th>Data</th><th>Gavėjas</th><th>Suma</th><th>Valiuta</th><th>Paaiškinimai</th></tr>
<tr><td>2024-01-05</td><td>Maxima</td><td>-12,50</td><td>EUR</td><td>pirkinys</td></tr>
<tr><td>2024-01-07</td><td>UAB Darbas</td><td>1 500,00</td><td>EUR</td><td>atlyginimas</td></tr>
</table></body></html>"""


def test_html_table_saved_as_xls_reads_as_the_table_it_is() -> None:
    tf = _read(HTML_XLS, "israsas.xls")
    assert not tf.errors, tf.errors
    assert _amounts(tf) == [Decimal("-12.50"), Decimal("1500.00")]
    assert tf.rows[1]["counterparty"] == "UAB Darbas"


PAYPAL_NESTED = {"transaction_details": [
    {"transaction_info": {"transaction_id": "9A", "transaction_initiation_date": "2024-01-05T10:00:00+0000",
                          "transaction_amount": {"currency_code": "USD", "value": "-12.50"}},
     "payer_info": {"payer_name": {"alternate_full_name": "Coffee Shop"}}},
    {"transaction_info": {"transaction_id": "9B", "transaction_initiation_date": "2024-01-06T09:00:00+0000",
                          "transaction_amount": {"currency_code": "USD", "value": "40.00"}},
     "payer_info": {"payer_name": {"alternate_full_name": "Alice"}}},
], "account_number": "XYZ", "total_items": 2}

BROKERAGE_NESTED = {"accounts": [
    {"accountId": "IRA-1", "currency": "USD", "activity": [
        {"tradeDate": "2024-03-01", "description": "DIVIDEND ACME", "netAmount": 12.34},
        {"tradeDate": "2024-03-04", "description": "BUY ACME", "netAmount": -500.0}]},
    {"accountId": "IND-2", "currency": "USD", "activity": [
        {"tradeDate": "2024-03-02", "description": "INTEREST", "netAmount": 0.5}]},
]}


def test_nested_json_export_finds_its_records_and_keeps_field_names() -> None:
    tf = _read(json.dumps(PAYPAL_NESTED), "activity.json")
    assert not tf.errors, tf.errors
    assert [(r["amount"], r["currency"]) for r in tf.rows] == [(Decimal("-12.50"), "USD"), (Decimal("40.00"), "USD")]
    assert tf.n_records == 2


def test_nested_json_with_records_under_each_account_keeps_the_account() -> None:
    tf = _read(json.dumps(BROKERAGE_NESTED), "brokerage.json")
    assert not tf.errors, tf.errors
    assert [(r["account"], r["amount"]) for r in tf.rows] == [
        ("IRA-1", Decimal("12.34")), ("IRA-1", Decimal("-500.0")), ("IND-2", Decimal("0.5"))]


QIF_INVESTMENT = """!Type:Invst
D01/15/2024
NBuy
YVANGUARD 500
I400.00
Q2
T800.00
^
D02/01/2024
NDiv
YVANGUARD 500
T12.34
^
"""


def test_qif_investment_account_reads_every_record() -> None:
    tf = _read(QIF_INVESTMENT, "broker.qif", default_currency="USD")
    assert not tf.errors, tf.errors
    assert len(tf.rows) == 2
    assert "VANGUARD 500" in (tf.rows[0]["description"] or "")


# ------------------------------------------------------------------ content decides, not the suffix

CSV = "Date,Description,Amount,Currency\n2024-01-02,Rent,-900.00,EUR\n"


@pytest.mark.parametrize("name", ["statement.pdf", "statement", "export.dat.bak"])
def test_a_csv_whatever_its_name_is_a_transaction_log(name: str) -> None:
    assert file_kind(name, CSV.encode()) == "transactions"


def test_a_real_pdf_stays_a_pdf() -> None:
    assert file_kind("x.csv", b"%PDF-1.7\n...") == "pdf"


def test_parquet_with_epoch_dates_reads_as_dates() -> None:
    ts = [int(datetime(2024, 1, d, 12, tzinfo=timezone.utc).timestamp()) for d in (2, 3)]
    for scale, values in (("s", ts), ("ms", [t * 1000 for t in ts])):
        buf = io.BytesIO()
        pq.write_table(pa.table({"booking_date": pa.array(values, pa.int64()), "amount": [-1.5, 2.0],
                                 "currency": ["EUR", "EUR"]}), buf)
        tf = _read(buf.getvalue(), "log.parquet")
        assert not tf.errors, (scale, tf.errors)
        assert [r["timestamp"].date().isoformat() for r in tf.rows] == ["2024-01-02", "2024-01-03"]


# ------------------------------------------------------------------ lines that are not transactions

WRAPPED = ("Transaction date,Value date,Description,Withdrawals (SGD),Deposits (SGD)\n"
           "18/04/2018,18/04/2018,DEBIT PURCHASE,6.66,\n,,15/04/18 UBER EATS HELP.UBER\n"
           "17/04/2018,17/04/2018,SALARY,,2500.00\n"
           "Generated on 19/04/2018\n")


def test_a_wrapped_description_line_joins_its_transaction_and_a_footer_is_named() -> None:
    tf = _read(WRAPPED, "history.csv")
    assert [(r["amount"], r["description"]) for r in tf.rows] == [
        (Decimal("-6.66"), "DEBIT PURCHASE | 15/04/18 UBER EATS HELP.UBER"), (Decimal("2500.00"), "SALARY")]
    assert [e.error_class for e in tf.errors] == ["NotATransaction"]
    assert tf.n_records == len(tf.rows) + len(tf.errors)  # the wrapped line is part of its record


def test_ofx_transaction_without_fitid_is_read_at_its_line() -> None:
    text = OFX_EMPTY_TAGS.replace("<FITID>A1", "<FITID>")
    tf = _read(text, "export.ofx")
    assert not tf.errors, tf.errors
    assert _amounts(tf) == [Decimal("-12.50"), Decimal("100.00")]
    assert tf.rows[0]["source_row"] == next(n for n, ln in enumerate(text.splitlines(), 1) if "-12.50" in ln)


def test_an_xls_that_is_a_csv_reads_as_the_csv_it_is() -> None:
    tf = _read('"Account No","Date","Details","Amount","Currency"\n"123","2024-01-02","Rent","-900.00","SEK"\n',
               "statement.xls")
    assert not tf.errors and _amounts(tf) == [Decimal("-900.00")]


MT940_LONG_REFERENCE = """:20:ASN
:25:NL81ASNB9999999999
:28C:1/1
:60F:C200101EUR404,81
:61:2001010101D65,00NOVBNL47INGB9999999999
hr gjlm paulissen
:86:NL47INGB9999999999 hr gjlm paulissen
Betaling sieraden
:62F:C200101EUR339,81
"""


def test_mt940_customer_reference_longer_than_swift_allows_still_reads() -> None:
    tf = _read(MT940_LONG_REFERENCE, "asn.sta")
    assert not tf.errors, tf.errors
    assert [(r["amount"], r["currency"], r["source_row"]) for r in tf.rows] == [(Decimal("-65.00"), "EUR", 5)]


def test_amount_written_without_a_leading_zero_and_a_pending_row_says_why() -> None:
    text = ("Date;Description;Amount;Currency\n31.10.2019;fee;-,01;RUB\n30.10.2019;shop;-120,00;RUB\n"
            "Pending;card payment;-3,00;RUB\n")
    tf = _read(text, "card.csv")
    assert _amounts(tf) == [Decimal("-0.01"), Decimal("-120.00")]
    assert [e.message for e in tf.errors] == ["no booking date yet ('Pending')"]


def test_unsigned_amounts_take_their_sign_from_a_debit_credit_mark_column() -> None:
    text = ('"Sąskaitos Nr.","Data","Gavėjas","Suma","Valiuta","D/K"\n'
            '"LT797300010000000001","2012-01-02","McDonald\'s","14.34","LTL","D"\n'
            '"LT797300010000000001","2012-01-05","Darbdavys UAB","1500.00","LTL","K"\n')
    tf = _read(text, "israsas.csv")
    assert not tf.errors, tf.errors
    assert _amounts(tf) == [Decimal("-14.34"), Decimal("1500.00")]


def test_a_role_word_inside_a_longer_header_and_a_currency_sign_in_parentheses() -> None:
    text = ("\ufeff\n\nRun Date,Action,Symbol,Quantity,Price ($),Amount ($),Settlement Date\n"
            "07/07/2025,YOU BOUGHT,FXNAX,8301.158,10.36,-86000,07/08/2025\n"
            "07/09/2025,DIVIDEND RECEIVED,FXNAX,,,12.50,07/09/2025\n")
    tf = _read(text, "History_for_Account_X.csv")
    assert not tf.errors, tf.errors
    assert [(r["amount"], r["currency"], r["timestamp"].day) for r in tf.rows] == [
        (Decimal("-86000"), "USD", 7), (Decimal("12.50"), "USD", 9)]


def test_a_role_word_in_a_header_is_dropped_when_the_cells_do_not_fit_it() -> None:
    text = ('"Umsatz getätigt von";"Belegdatum";"Buchungsbetrag";"Buchungswährung";"Beschreibung"\n'
            '"51_5 4400 7700 9222443";"20.02.18";"-5,00";"EUR";"STARBUCKS"\n')
    tf = _read(text, "umsatz.csv")
    assert not tf.errors, tf.errors
    assert [(r["amount"], r["currency"]) for r in tf.rows] == [(Decimal("-5.00"), "EUR")]


POLISH = ("Data operacji;Opis operacji;Rachunek;Kwota;Waluta\n"
          "2024-02-01;Zakupy w sklepie Żabka, Łódź;PL61109010140000071219812874;-23,45;PLN\n"
          "2024-02-03;Wpłata wynagrodzenia – spółka z o.o.;PL61109010140000071219812874;5 400,00;PLN\n")


def test_polish_cp1250_export_is_not_read_as_cp1252_mojibake() -> None:
    tf = _read(POLISH.encode("cp1250"), "historia.csv")
    assert not tf.errors, tf.errors
    assert tf.details["encoding"] == "cp1250"
    assert [r["description"] for r in tf.rows] == ["Zakupy w sklepie Żabka, Łódź", "Wpłata wynagrodzenia – spółka z o.o."]
    assert _amounts(tf) == [Decimal("-23.45"), Decimal("5400.00")]
