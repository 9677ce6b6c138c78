"""Bank statements saved as laid-out text (`pdftotext -layout` of a PDF statement, a card company's text
statement), made up here in the layouts such files use: each movement once, signed by its column or mark, dated in
the statement's year, with a precise error where the page does not say enough."""

from __future__ import annotations

import hashlib
from datetime import date
from decimal import Decimal

from pipeline.ingest.transactions import TransactionFile, read_transactions


def _read(text: str, name: str = "statement.txt") -> TransactionFile:
    raw = text.encode()
    return read_transactions(raw, name, hashlib.sha256(raw).hexdigest())


def _col(left: str, at: int, right: str) -> str:
    """`right` right-aligned so that it ends at column `at`."""
    return left + " " * max(1, at - len(left) - len(right)) + right


# Debit and credit columns, a three-line header, a year-end crossing, descriptions wrapped below their line,
# a movement whose figures sit one line below its date, and a fee detail listing after the totals that repeats
# a movement of the main listing.
DEBIT_CREDIT = "\n".join([
    "                                   RELEVE N 1 AU 03/01/2025",
    "   IBAN FR76 3000 6000 0112 3456 7890 189",
    "",
    "   DATE                                            DATE      DATE           DEBIT          CREDIT",
    "   COMPTA        LIBELLE / REFERENCE              OPERATION VALEUR",
    "                                                                            EUROS          EUROS",
    _col("                 SOLDE CREDITEUR AU 02/12/2024", 96, "1 100,72"),
    _col("     05/12       PRLV SEPA ELECTRICITE          05/12     05/12", 80, "292,00"),
    "                    MANDAT 99812 REF 2024-12",
    _col("     18/12       VIREMENT SALAIRE ACME SARL     18/12     18/12", 96, "2 156,70"),
    "     20/12       F COM INTERVENTION             20/12     20/12",
    _col("                 FRAIS 0032259", 80, "8,00"),
    _col("     02/01       CARTE 3112 BOULANGERIE         31/12     02/01", 80, "4,10"),
    _col("                 TOTAL DES MOUVEMENTS", 96, "304,10     2 156,70"),
    "",
    "                 RECAPITULATIF DES FRAIS",
    _col("     20/12       F COM INTERVENTION", 80, "8,00"),
])


def test_debit_and_credit_columns_of_a_laid_out_statement() -> None:
    out = _read(DEBIT_CREDIT)
    rows = [(r["timestamp"].date(), r["amount"], r["currency"]) for r in out.rows]
    assert rows == [(date(2024, 12, 5), Decimal("-292.0000"), "EUR"), (date(2024, 12, 18), Decimal("2156.7000"), "EUR"),
                    (date(2024, 12, 20), Decimal("-8.0000"), "EUR"), (date(2025, 1, 2), Decimal("-4.1000"), "EUR")]
    lines = DEBIT_CREDIT.splitlines()
    assert [r["source_row"] for r in out.rows] == [lines.index(ln) + 1 for ln in lines if ln[5:10] in
                                                     ("05/12", "18/12", "20/12", "02/01")][:4]
    assert out.rows[0]["description"] == "PRLV SEPA ELECTRICITE | MANDAT 99812 REF 2024-12"
    assert out.rows[0]["account"] == "FR7630006000011234567890189"
    # the fee listing after the totals books nothing of its own: a row error that says which line it repeats
    assert [(e.error_class, e.source_row) for e in out.errors] == [("NotATransaction", len(lines))]
    assert "repeats the movement of line 11" in out.errors[0].message
    assert out.details["format"] == "text statement"


# One amount column with Dutch Af/Bij marks and a sparse column of foreign-currency amounts; dates with month
# names and no year; the statement's date above the listing.
CARD = "\n".join([
    "Datum                                       Klantnummer",
    "17 januari 2025                             99999999999",
    "",
    "Datum           Datum              Omschrijving                          Bedrag in              Bedrag",
    "transactie      boeking                                                  vreemde valuta         in euro's",
    "",
    _col("23 dec          24 dec            IDEAL BETALING, DANK U", 104, "500,00      Bij"),
    _col("28 dec          29 dec            HOTEL LONDON          GB", 80, "85,10 GBP") + "          101,33      Af",
    _col("03 jan          04 jan            NETFLIX.COM           NL", 104, "7,99      Af"),
])


def test_an_amount_column_signed_by_marks_beside_a_foreign_currency_column() -> None:
    out = _read(CARD)
    assert [(r["timestamp"].date(), r["amount"], r["currency"]) for r in out.rows] == [
        (date(2024, 12, 23), Decimal("500.0000"), "EUR"), (date(2024, 12, 28), Decimal("-101.3300"), "EUR"),
        (date(2025, 1, 3), Decimal("-7.9900"), "EUR")]
    assert out.rows[1]["description"] == "HOTEL LONDON GB"
    assert out.errors == []


def test_a_yearless_date_takes_the_year_of_the_statements_span_in_listing_order() -> None:
    """A yearly statement from 02/01/2023 to 02/01/2024: its January lines are January 2023 until the listing
    has moved on into the next year."""
    text = "\n".join([
        "                      RELEVE ANNUEL AU 02/01/2024",
        "   DATE              LIBELLE                                        MONTANT EUR",
        _col("                  SOLDE AU 02/01/2023", 80, "5 954,72"),
        _col("   12/01           VIREMENT", 80, "- 500,00"),
        _col("   24/04           VIREMENT", 80, "1 000,00"),
        _col("   28/12           VIREMENT", 80, "- 3 000,00"),
        _col("   01/01           INTERETS", 80, "15,32"),
    ])
    out = _read(text)
    assert [(r["timestamp"].date(), r["amount"]) for r in out.rows] == [
        (date(2023, 1, 12), Decimal("-500.0000")), (date(2023, 4, 24), Decimal("1000.0000")),
        (date(2023, 12, 28), Decimal("-3000.0000")), (date(2024, 1, 1), Decimal("15.3200"))]


def test_day_and_month_order_nothing_decides_is_a_precise_file_error() -> None:
    text = "\n".join([
        "Date        Description                     Debit        Credit",
        _col("01/02       COFFEE", 52, "3,50"),
        _col("03/04       SALARY", 65, "2 000,00"),
    ])
    out = _read(text)
    assert out.rows == []
    assert [e.error_class for e in out.errors] == ["UnrecognisedTable"]
    assert "day/month or month/day" in out.errors[0].message


def test_unsigned_amounts_under_no_header_are_not_read_as_anything() -> None:
    text = "\n".join(["Statement of 31/03/2025", "", "14/03  COFFEE SHOP        3.50", "15/03  SALARY      2000.00"])
    out = _read(text)
    assert out.rows == []
    assert "no sign or debit/credit mark and no header row names their columns" in out.errors[0].message


def test_a_date_after_the_totals_that_repeats_nothing_is_a_row_error_not_a_booking() -> None:
    text = DEBIT_CREDIT + "\n" + _col("     21/12       F COM AUTRE", 80, "9,00")
    out = _read(text)
    assert len(out.rows) == 4
    assert [e.error_class for e in out.errors] == ["NotATransaction", "BadRecord"]
    assert "after the listing's totals" in out.errors[1].message


def test_a_text_statement_none_of_whose_lines_reads_is_one_file_error() -> None:
    """Dated lines whose year nothing on the page gives: no row can be booked, so the file is one error naming
    why, not a row error per line."""
    text = "\n".join([
        "Date        Description                     Debit        Credit",
        _col("14/03       COFFEE", 52, "3,50"),
        _col("15/03       SALARY EUR", 65, "2 000,00"),
    ])
    out = _read(text)
    assert out.rows == []
    assert [(e.error_class, e.unit) for e in out.errors] == [("UnrecognisedTable", "file")]
    assert "none of its 2 dated lines" in out.errors[0].message and "without a year" in out.errors[0].message


def test_a_text_statement_takes_its_currency_from_its_banks_bic() -> None:
    text = "\n".join([
        "ACME BANK  SWIFT: CHASUS33              STATEMENT AS OF 03/31/2025",
        "",
        "Date        Description                     Withdrawals      Deposits",
        _col("03/14       COFFEE", 55, "3.50"),
        _col("03/15       PAYROLL", 70, "2,000.00"),
    ])
    out = _read(text)
    assert [(r["timestamp"].date(), r["amount"], r["currency"]) for r in out.rows] == [
        (date(2025, 3, 14), Decimal("-3.5000"), "USD"), (date(2025, 3, 15), Decimal("2000.0000"), "USD")]
