"""Transaction-log ingestion: dialect sniffing, values, encodings, row-level errors, real exports."""

from __future__ import annotations

import hashlib
import io
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.ingest.transactions import TransactionFile, read_transactions, rows_to_table
from pipeline.ingest.values import choose_date_format, detect_decimal_comma, parse_amount
from schemas import TRANSACTION_ARROW_SCHEMA

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "transactions"


def _read(data: bytes | str, name: str = "log.csv", encoding: str = "utf-8", **kw: object) -> TransactionFile:
    raw = data.encode(encoding) if isinstance(data, str) else data
    return read_transactions(raw, name, hashlib.sha256(raw).hexdigest(), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "comma", "expected"),
    [("-1.234,56", True, "-1234.56"), ("1,234.56", False, "1234.56"), ("-17 351,00", True, "-17351.00"),
     ("(12.50)", False, "-12.50"), ("12.50-", False, "-12.50"), ("-$3,320.05", False, "-3320.05"),
     ("EUR 7,5", True, "7.50"), ("1'000.25", False, "1000.25")],
)
def test_parse_amount(raw: str, comma: bool, expected: str) -> None:
    value, _ = parse_amount(raw, comma)
    assert value == Decimal(expected)


def test_parse_amount_rejects_text() -> None:
    with pytest.raises(ValueError):
        parse_amount("twelve", False)


def test_decimal_comma_detection_is_per_column() -> None:
    assert detect_decimal_comma(["-3,40", "219,95"])
    assert not detect_decimal_comma(["-59.99", "1,234.00"])
    assert detect_decimal_comma(["1.234,00", "12,00"])
    assert detect_decimal_comma(["1.234", "2.000"], default=True)  # ambiguous: the hint decides


@pytest.mark.parametrize(
    ("values", "fmt"),
    [(["2024-01-31", "2024-02-01"], "%Y-%m-%d"), (["31.01.2024"], "%d.%m.%Y"), (["22.02.18"], "%d.%m.%y"),
     (["20190311"], "%Y%m%d"), (["13/01/2024", "02/03/2024"], "%d/%m/%Y"), (["01/13/2024", "02/03/2024"], "%m/%d/%Y"),
     (["2019-07-06 00:00:00"], "%Y-%m-%d %H:%M:%S")],
)
def test_date_format_chosen_for_the_column(values: list[str], fmt: str) -> None:
    assert choose_date_format(values) == fmt


def test_ambiguous_slash_dates_are_day_first_unless_usd() -> None:
    assert choose_date_format(["01/02/2024", "03/04/2024"]) == "%d/%m/%Y"
    assert choose_date_format(["01/02/2024", "03/04/2024"], prefer_month_first=True) == "%m/%d/%Y"


def test_german_semicolon_cp1252_with_bad_rows_keeps_line_numbers() -> None:
    text = ("Kontoauszug Girokonto\nIBAN: DE02 1203 0000 0000 2020 51\n\n"
            "Buchungstag;Valuta;Empfänger;Verwendungszweck;Betrag;Währung\n"
            "01.02.24;01.02.24;Bäckerei Müller;Brötchen;-3,50;EUR\n"
            "15.02.24;15.02.24;Arbeitgeber;Gehalt;2.500,00;EUR\n"
            "xx.02.24;;Kaputt;;abc;EUR\n")
    tf = _read(text, "de.csv", "cp1252")
    assert len(tf.rows) == 2 and len(tf.errors) == 1
    first = tf.rows[0]
    assert first["account"] == "DE02120300000000202051"  # from the preamble
    assert first["timestamp"] == datetime(2024, 2, 1, tzinfo=timezone.utc)
    assert first["amount"] == Decimal("-3.5000") and first["currency"] == "EUR"
    assert first["counterparty"] == "Bäckerei Müller" and first["source_row"] == 5
    assert tf.rows[1]["amount"] == Decimal("2500.0000")
    assert tf.errors[0].source_row == 7 and tf.errors[0].source_file == "de.csv"
    assert tf.details["encoding"] == "cp1252" and tf.details["delimiter"] == ";"


def test_utf8_bom_tab_delimited_with_debit_credit_columns() -> None:
    text = "\ufeffDate\tDescription\tDebit\tCredit\tCurrency\n2024-01-05\tRent\t1,200.00\t\tUSD\n2024-01-06\tPay\t\t3,000.00\tUSD\n"
    tf = _read(text, "us.tsv")
    assert [r["amount"] for r in tf.rows] == [Decimal("-1200.0000"), Decimal("3000.0000")]
    assert tf.rows[0]["description"] == "Rent"


def test_cyrillic_cp1251_header_is_decoded_and_matched() -> None:
    text = "Дата операции;Сумма операции;Валюта операции;Описание\n2019-07-06;-4,50;RUR;Кофе\n"
    tf = _read(text, "ru.csv", "cp1251")
    assert tf.details["encoding"] == "cp1251"
    assert tf.rows[0]["currency"] == "RUB" and tf.rows[0]["description"] == "Кофе"


def test_pipe_delimited_headerless_infers_roles() -> None:
    text = "H|ACCT|EUR\n|Card payment A|20240301|SHOP ONE|-19.99|\n|Card payment B|20240302|SHOP TWO|-5.00|\n|Salary|20240303|ACME|1500.00|\n"
    tf = _read(text, "acct.dat")
    assert len(tf.rows) == 3 and not tf.errors
    assert tf.rows[0]["amount"] == Decimal("-19.9900") and tf.rows[0]["currency"] == "EUR"
    assert tf.rows[2]["counterparty"] == "ACME" and tf.rows[0]["account"] == "acct"


def test_jsonl_bad_line_is_an_error_with_its_line() -> None:
    text = ('{"date":"2024-02-03","amount":-12.5,"currency":"usd","payee":"Coffee"}\n{oops\n\n'
            '{"booking_date":"2024-02-04","amount":"100.00","currency":"USD"}\n')
    tf = _read(text, "card.jsonl")
    assert [r["source_row"] for r in tf.rows] == [1, 4]
    assert tf.errors[0].source_row == 2 and tf.errors[0].error_class == "BadJSON"
    assert tf.rows[0]["amount"] == Decimal("-12.5000") and tf.rows[0]["currency"] == "USD"


def test_jsonl_string_with_unicode_line_separators_stays_one_record() -> None:
    """JSON Lines records end at CR/LF only: U+2028, U+2029 and U+0085 are legal raw characters inside
    a JSON string (str.splitlines would cut the record there and shift every later source_row)."""
    memo = "rent\u2028march\u2029paid\u0085in full"
    text = ('{"date":"2024-02-03","amount":-12.5,"currency":"EUR","payee":"' + memo + '"}\r\n'
            '{"date":"2024-02-04","amount":"100.00","currency":"EUR","payee":"Salary"}\n')
    tf = _read(text, "card.jsonl")
    assert not tf.errors
    assert [r["source_row"] for r in tf.rows] == [1, 2]
    assert tf.rows[0]["counterparty"] == memo


def test_csv_field_with_unicode_line_separator_keeps_rows_and_numbers() -> None:
    text = ("Exported by\u2028Example Bank\n"  # a preamble line: source_row counts physical lines
            "Date,Amount,Currency,Description\n"
            '2024-01-01,5.00,EUR,"rent\u2028march"\n'
            "2024-01-02,6.00,EUR,plain\n")
    tf = _read(text, "bank.csv")
    assert not tf.errors
    assert [r["source_row"] for r in tf.rows] == [3, 4]
    assert tf.rows[0]["description"] == "rent\u2028march"


def test_jsonl_with_cr_only_line_endings_is_read_row_by_row() -> None:
    text = ('{"date":"2024-02-03","amount":-1,"currency":"EUR"}\r{bad\r'
            '{"date":"2024-02-04","amount":2,"currency":"EUR"}\r')
    tf = _read(text, "old-mac.jsonl")
    assert [r["source_row"] for r in tf.rows] == [1, 3]
    assert [e.source_row for e in tf.errors] == [2]


def test_parquet_with_typed_columns() -> None:
    table = pa.table({"Buchungsdatum": pa.array([datetime(2024, 1, 2)], pa.timestamp("us")),
                      "Betrag": pa.array([Decimal("-7.25")], pa.decimal128(10, 2)),
                      "Waehrung": ["EUR"], "Konto": ["X"]})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    tf = _read(buf.getvalue(), "t.parquet")
    assert tf.rows[0]["amount"] == Decimal("-7.2500") and tf.rows[0]["source_row"] == 1


def test_an_export_that_states_no_currency_keeps_its_rows_with_the_currency_empty() -> None:
    text = "Date,Amount,Description\n2024-01-01,5.00,x\n2024-01-02,-2.50,y\n"
    tf = _read(text)
    assert not tf.errors and [r["currency"] for r in tf.rows] == [None, None]  # never a guessed one
    assert [r["amount"] for r in tf.rows] == [Decimal("5.00"), Decimal("-2.50")]
    assert tf.details["currency_unstated_rows"] == 2
    assert rows_to_table(tf.rows).column("currency").null_count == 2
    assert _read(text, default_currency="EUR").rows[0]["currency"] == "EUR"


def test_a_row_without_the_currency_its_file_states_elsewhere_is_a_row_error() -> None:
    text = "Date,Amount,Currency\n2024-01-01,5.00,EUR\n2024-01-02,-2.50,\n2024-01-03,1.00,EUR\n"
    tf = _read(text)
    assert [r["source_row"] for r in tf.rows] == [2, 4] and [r["currency"] for r in tf.rows] == ["EUR", "EUR"]
    assert [(e.source_row, e.message.startswith("no currency")) for e in tf.errors] == [(3, True)]
    assert "currency_unstated_rows" not in tf.details


@pytest.mark.parametrize("text", ["just some prose\nwithout any table\n", "a,b,c\n1,2,3\n", ""])
def test_unrecognised_file_is_one_file_error(text: str) -> None:
    tf = _read(text, "x.csv")
    assert not tf.rows and len(tf.errors) == 1 and tf.errors[0].unit == "file"


def test_rows_match_the_canonical_arrow_schema() -> None:
    tf = _read("Date,Amount,Currency\n2024-01-01,5.00,EUR\n")
    assert rows_to_table(tf.rows).schema.equals(TRANSACTION_ARROW_SCHEMA)


@pytest.mark.skipif(not REALDATA.is_dir(), reason="shared/realdata/transactions is absent on this machine")
def test_realdata_bank_exports() -> None:
    def read(name: str) -> TransactionFile:
        data = (REALDATA / name).read_bytes()
        return read_transactions(data, name, hashlib.sha256(data).hexdigest())

    n26 = read("b2y_DE-N26__20171001-20171106.csv")
    assert n26.rows[0]["amount"] == Decimal("-59.9900") and n26.rows[0]["currency"] == "EUR"
    spk = read("b2y_DE-Sparkasse__20180226-1000594757-umsatz.CSV")
    assert spk.rows[0]["timestamp"].date().isoformat() == "2018-02-22" and spk.rows[0]["amount"] == Decimal("-36.9900")
    kbc = read("b2y_BE-KBC__export_BE11123456789012_20180304_1422.csv")
    assert kbc.rows[0]["amount"] == Decimal("-3.4000") and kbc.rows[0]["account"] == "BE11123456789012"
    cz = read("b2y_CZ-Raiffeisen__Movements_1234512345_201805271848.csv")
    assert cz.details["encoding"] == "cp1250" and cz.rows[0]["currency"] == "CZK"
    at = read("b2y_AT-Raiffeisen__kta_ei.dat")  # header-less; the memo's "POS 6,49" is not the amount
    assert at.rows[0]["amount"] == Decimal("-89.3000") and len(at.rows) == 11
    vtb = read("ofxstmt-ru_vtb.csv")
    assert len(vtb.rows) == 4 and vtb.rows[0]["source_row"] == 13
    schwab = read("reds_Schwab__brokerage_XX876_Transactions_20220731.csv")
    assert schwab.rows[0]["currency"] == "USD" and len(schwab.errors) == 1  # the "Transactions Total" line
    revolut = read("ofxstmt-revolut_2022-january.csv")
    assert len(revolut.rows) == 9 and not revolut.errors  # pending rows fall back to the start date


@pytest.mark.parametrize(("raw", "column_comma", "expected"), [
    ("1.234,56 €", False, "1234.5600"),     # its own comma decimal, in a point-decimal column
    ("1,234.56", True, "1234.5600"),        # its own point decimal, in a comma-decimal column
    ("-12,5", False, "-12.5000"),           # one comma, one digit after: a decimal comma
    ("3.75", True, "3.7500"),
    ("1.234.567", False, "1234567.0000"),   # repeated separator: thousands groups
    ("1,234", False, "1234.0000"),          # ambiguous: the column decides
    ("1,234", True, "1.2340"),
    ("1.234", True, "1234.0000"),
])
def test_the_decimal_mark_is_read_per_value_with_the_column_as_hint(raw: str, column_comma: bool, expected: str) -> None:
    from decimal import Decimal

    from pipeline.ingest.values import parse_amount

    assert parse_amount(raw, column_comma)[0] == Decimal(expected)


def test_compound_header_words_and_a_bare_booking_column_name_the_date() -> None:
    """German, Dutch and Nordic headers join a qualifier to the head word ('Wertstellungsdatum'); ING Germany heads
    its booking dates 'Buchung'. Both found no header before."""
    text = ("Umsatzanzeige;Datei erstellt am: 28.12.2018 16:57\n\nIBAN;DE89 3704 0044 0532 0130 00\n"
            "Zeitraum;01.12.2018 - 28.12.2018\nSaldo;150,00;EUR\n\nSortierung;Datum absteigend\n\n"
            "In der CSV-Datei finden Sie alle bereits gebuchten Umsätze.\n\n"
            "Buchung;Wertstellungsdatum;Auftraggeber/Empfänger;Buchungstext;Verwendungszweck;Saldo;Währung;Betrag;"
            "Währung\n"
            "28.12.2018;27.12.2018;Stadtwerke;Lastschrift;Abschlag;150,00;EUR;-5,50;EUR\n"
            "21.12.2018;21.12.2018;Karl Karlsen;Gutschrift;Miete;155,50;EUR;50,00;EUR\n")
    out = _read(text, "umsaetze.csv", encoding="cp1252")
    assert not out.errors
    assert [(r["timestamp"].date().isoformat(), r["amount"], r["currency"], r["counterparty"]) for r in out.rows] == [
        ("2018-12-28", Decimal("-5.5000"), "EUR", "Stadtwerke"), ("2018-12-21", Decimal("50.0000"), "EUR",
                                                                   "Karl Karlsen")]


def test_italian_debit_and_credit_columns() -> None:
    text = ("Data;Valuta;Addebiti;Accrediti;Descrizione operazioni\n"
            "03/01/18;03/01/18;2,90;;IMPOSTA DI BOLLO\n"
            "15/01/18;15/01/18;;1.250,00;BONIFICO STIPENDIO\n")
    out = _read(text, "movimenti.csv", default_currency="EUR")
    assert not out.errors
    assert [r["amount"] for r in out.rows] == [Decimal("-2.9000"), Decimal("1250.0000")]


def test_an_opening_balance_line_is_a_summary_row() -> None:
    text = ("Data;Valuta;Addebiti;Accrediti;Descrizione operazioni\n"
            "31/12/17;;;26.851,95|;SALDO INIZIALE\n"
            "03/01/18;03/01/18;2,90;;IMPOSTA DI BOLLO\n")
    out = _read(text, "movimenti.csv", default_currency="EUR")
    assert [r["amount"] for r in out.rows] == [Decimal("-2.9000")]
    assert [(e.error_class, e.source_row) for e in out.errors] == [("SummaryRow", 2)]
    assert "opening or closing balance" in out.errors[0].message


def test_two_compounds_of_the_amount_word_leave_the_amount_open() -> None:
    """'Originalbetrag' (in the card's foreign currency) and 'Gebührenbetrag' (a fee): the shared head word alone
    cannot choose, so the file says so instead of taking the first."""
    text = ("Belegdatum;Originalbetrag;Originalwährung;Gebührenbetrag;Beschreibung\n"
            "20.02.18;-5,00;USD;-0,10;STARBUCKS NEW YORK\n"
            "22.02.18;-12,00;EUR;0,00;BAHN\n")
    out = _read(text, "umsatz.csv")
    assert out.rows == []
    assert "could each hold the amount" in out.errors[0].message


def test_the_booked_amount_is_the_amount_beside_the_original_one() -> None:
    """'Buchungsbetrag' is what the account booked, in 'Buchungswährung'; the original amount is the card's."""
    text = ("Belegdatum;Buchungsdatum;Originalbetrag;Originalwährung;Buchungsbetrag;Buchungswährung;Beschreibung\n"
            "20.02.18;21.02.18;-5,00;USD;-4,10;EUR;STARBUCKS NEW YORK\n"
            "22.02.18;23.02.18;-12,00;EUR;-12,00;EUR;BAHN\n")
    out = _read(text, "umsatz.csv")
    assert not out.errors
    assert [(r["amount"], r["currency"]) for r in out.rows] == [(Decimal("-4.10"), "EUR"), (Decimal("-12.00"), "EUR")]
    assert {r["counterparty"] for r in out.rows} == {None}  # a column of currency codes is no counterparty


def test_a_currency_code_after_a_money_columns_name_is_the_files_currency() -> None:
    text = ('"Date";"Booking text";"Debit CHF";"Credit CHF";"Value date";"Balance CHF"\n'
            '"01.01.2024";"Credit salary";"";"5000.00";"01.01.2024";"5000.00"\n'
            '"05.01.2024";"Debit TWINT: Test Merchant";"25.50";"";"05.01.2024";"4974.50"\n')
    out = _read(text, "konto.csv")
    assert not out.errors
    assert [(r["amount"], r["currency"], r["description"]) for r in out.rows] == [
        (Decimal("5000.0000"), "CHF", "Credit salary"), (Decimal("-25.5000"), "CHF", "Debit TWINT: Test Merchant")]


def test_a_three_letter_word_after_a_money_columns_name_is_no_currency() -> None:
    text = "Date;Description;Amount net\n01.01.2024;Fee;-5,00\n"
    out = _read(text, "log.csv", default_currency="EUR")
    assert [(r["amount"], r["currency"]) for r in out.rows] == [(Decimal("-5.0000"), "EUR")]


def test_the_banks_labelled_bic_in_the_preamble_gives_its_countrys_currency() -> None:
    text = ("Kontoauszug;Girokonto\nBIC;DEUTDEFF\n\nDatum;Text;Betrag\n"
            "02.01.2024;Miete;-800,00\n03.01.2024;Gehalt;2500,00\n")
    out = _read(text, "auszug.csv")
    assert not out.errors
    assert {r["currency"] for r in out.rows} == {"EUR"}
    unlabelled = _read(text.replace("BIC;DEUTDEFF", "Filiale;DEUTDEFF"), "auszug.csv")
    assert not unlabelled.errors and {r["currency"] for r in unlabelled.rows} == {None}  # a bare code says nothing
