"""Export layouts met in public fixture folders (issue 39), each made up here in miniature: a JSON payment record
signed by its credit flag, month names in other languages, Nordic and Baltic column names, statement summary
lines, a disclaimer under the table, holdings and balances tables, entries in units only, Excel's XML
spreadsheet. Every test fails on the code before these readers."""

from __future__ import annotations

import hashlib
import json
from datetime import date
from decimal import Decimal

from pipeline.ingest.transactions import TransactionFile, read_transactions


def _read(data: bytes | str, name: str, **kw: object) -> TransactionFile:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return read_transactions(raw, name, hashlib.sha256(raw).hexdigest(), **kw)  # type: ignore[arg-type]


def _payment(when: str, net: str, gross: str, is_credit: bool, lang_fee: str = "$0.00") -> str:
    return json.dumps({
        "fundingSource": {"fundingSourceList": [{"type": "BANK_ACCOUNT", "amount": gross, "currencyCode": "USD"}]},
        "counterparty": {"name": "John Smith", "isBusiness": False},
        "transactionType": "Money Sent", "date": when, "isCredit": is_credit, "isBuyer": True,
        "amount": {"grossAmount": gross, "netAmount": net, "feeAmount": lang_fee,
                   "rawAmounts": {"gross": {"value": gross.strip("$"), "currencyCode": "USD"}}},
        "transactionId": "2RG4T9AJK3BT2DOV6"})


def test_json_payment_record_is_one_transaction_signed_by_its_credit_flag() -> None:
    """A payment's detail page saved as JSON: its only list is the funding sources (no dates); the document
    itself is the transaction, its net amount the movement ('value' under 'gross' is no amount of its own) and
    `isCredit` its direction."""
    sent = _read(_payment("May 15, 2016", "$82.62", "$80.00", False, "$2.62"), "2RG4T9AJK3BT2DOV6.json")
    assert not sent.errors
    [row] = sent.rows
    assert (row["timestamp"].date(), row["amount"], row["currency"], row["counterparty"]) == (
        date(2016, 5, 15), Decimal("-82.62"), "USD", "John Smith")
    assert "the document is one transaction record" in sent.details["notes"]
    received = _read(_payment("August 26, 2019", "$73.45", "$75.95", True), "5Y903271C7730840Z.json")
    assert [r["amount"] for r in received.rows] == [Decimal("73.45")]


def test_json_record_without_sign_or_flag_is_an_error_naming_the_missing_direction() -> None:
    receipt = json.dumps({"date": "2019-01-10", "merchant": "Ice Cream Shop", "total": "34.00",
                          "currency_code": "USD", "taxes": []})
    tf = _read(receipt, "12345678.json")
    assert not tf.rows and [e.error_class for e in tf.errors] == ["UnrecognisedTable"]
    assert "which way the money moved is not stated" in tf.errors[0].message


def test_month_names_in_another_language_are_dates() -> None:
    doc = json.dumps({"date": "25. März 2020", "isCredit": True, "counterparty": {"name": "Jane Doe"},
                      "amount": {"netAmount": "166,00\u00a0EUR", "grossAmount": "166,00\u00a0EUR"}})
    tf = _read(doc, "3BK1B8JPQGQ5V8NVZ.json")
    assert not tf.errors
    assert [(r["timestamp"].date(), r["amount"], r["currency"]) for r in tf.rows] == [
        (date(2020, 3, 25), Decimal("166.00"), "EUR")]
    csv = "Datum;Betrag;Text\n3 févr. 2021;-12,50;Boulangerie\n12 mars 2021;100,00;Virement\n"
    assert [r["timestamp"].date() for r in _read(csv, "releve.csv", default_currency="EUR").rows] == [
        date(2021, 2, 3), date(2021, 3, 12)]


def test_amount_in_brackets_is_a_unit_only_when_it_is_a_currency() -> None:
    """'Amount (fee)' is the fee, not an amount in the currency 'FEE': the total is the amount; a sign set apart
    from the symbol ('- $220.00') is still an amount."""
    csv = ('"ID","Datetime","Type","Note","From","To","Amount (total)","Amount (fee)"\n'
           '"1","2017-04-25T03:15:53","Payment","Tutoring","Brian","Tom","- $220.00",""\n'
           '"2","2017-09-06T05:10:45","Payment","Rent","Sally","Brian","+ $1,150.00",""\n')
    tf = _read(csv, "venmo.csv")
    assert not tf.errors
    assert [(r["amount"], r["currency"]) for r in tf.rows] == [(Decimal("-220.00"), "USD"), (Decimal("1150.00"), "USD")]


def test_payment_processor_net_column_is_the_amount() -> None:
    csv = ('"id","created_utc","currency","gross","fee","net","description"\n'
           '"txn_1","2020-01-23 08:26:29","usd","12.00","-0.65","11.35","charge"\n'
           '"txn_2","2020-01-23 08:26:31","usd","-0.77","0.00","-0.77","refund"\n')
    assert [r["amount"] for r in _read(csv, "balance_history.csv").rows] == [Decimal("11.35"), Decimal("-0.77")]


def test_lithuanian_statement_with_dk_marks_and_its_balance_and_turnover_lines() -> None:
    """Baltic names ('Data', 'Suma', 'Valiuta', 'D/K'); the opening and closing balance and turnover lines carry
    a date and an amount but only a label: summary rows, not transactions."""
    csv = ('"Sąskaitos Nr.","Data","Gavėjas","Paaiškinimai","Suma","Valiuta","D/K"\n'
           '"LT797300010000000001","2012-01-01","","Likutis pradžiai","2123.82","LTL","K"\n'
           '"LT797300010000000001","2012-01-02","Restoranas","PIRKINYS 2011.12.30","14.34","LTL","D"\n'
           '"LT797300010000000001","2012-01-05","UAB Darbdavys","Atlyginimas","600.00","LTL","K"\n'
           '"LT797300010000000001","2012-01-31","","Apyvarta","14.34","LTL","D"\n'
           '"LT797300010000000001","2012-01-31","","Likutis pabaigai","2709.48","LTL","K"\n')
    tf = _read(csv, "swedbank.csv")
    assert [(r["amount"], r["currency"], r["counterparty"]) for r in tf.rows] == [
        (Decimal("-14.34"), "LTL", "Restoranas"), (Decimal("600.00"), "LTL", "UAB Darbdavys")]
    assert [(e.source_row, e.error_class) for e in tf.errors] == [(2, "SummaryRow"), (5, "SummaryRow"),
                                                                 (6, "SummaryRow")]


def test_norwegian_in_and_out_columns() -> None:
    csv = ('Dato;Beskrivelse;Rentedato;Inn;Ut;Til konto\n'
           '"28.02.2025";"KIWI MAJORSTUEN";;;"-348,56";"12345678901"\n'
           '"25.02.2025";"Lønn";;"25000,00";;"12345678901"\n')
    tf = _read(csv, "sb1.csv")
    assert not tf.errors
    assert [(r["timestamp"].date(), r["amount"], r["description"]) for r in tf.rows] == [
        (date(2025, 2, 28), Decimal("-348.56"), "KIWI MAJORSTUEN"), (date(2025, 2, 25), Decimal("25000.00"), "Lønn")]


def test_disclaimer_lines_under_the_table_do_not_hide_its_date_column() -> None:
    footer = "".join(f'"Disclaimer line {i}: information is provided for your use only, not for distribution",,,\n'
                     for i in range(12))
    csv = ("Run Date,Action,Amount ($),Settlement Date\n"
           "01/27/2023,DIRECT DEBIT TREASURY,-10000,\n01/23/2023,DIRECT DEPOSIT,200.99,01/24/2023\n"
           "01/19/2023,DIVIDEND RECEIVED,3.10,\n" + footer)
    tf = _read(csv, "History_for_Account.csv")
    assert [(r["timestamp"].date(), r["amount"]) for r in tf.rows] == [
        (date(2023, 1, 27), Decimal("-10000")), (date(2023, 1, 23), Decimal("200.99")),
        (date(2023, 1, 19), Decimal("3.10"))]
    assert {e.error_class for e in tf.errors} == {"NotATransaction"} and len(tf.errors) == 12


def test_holdings_and_balances_tables_are_named_as_what_they_are() -> None:
    positions = ('"Positions for account XXXX-4321 as of 11/30/2020"\n\n'
                 '"Symbol","Description","Quantity","Price","Market Value","Cost Basis","Gain/Loss $",\n'
                 '"SCHA","SCHWAB US SMALL-CAP ETF","10","$80.00","$800.00","$700.00","$100.00",\n')
    balances = '"Start Date","End Date","Start Balance","End Balance"\n"2017-04-05","2017-07-03","$0.00","$10.00"\n'
    for text, name, kind in ((positions, "Positions.CSV", "a holdings table"),
                             (balances, "balances.csv", "a balances table")):
        tf = _read(text, name)
        assert not tf.rows and [e.error_class for e in tf.errors] == ["NotTransactions"]
        assert kind in tf.errors[0].message


def test_entries_in_units_only_move_no_money() -> None:
    csv = ('"Date","Action","Symbol","Quantity","Price","Amount"\n'
           '"11/20/2020","Dividend","ICLN","","","$2.11"\n'
           '"11/14/2020","Stock Split","HYLB","18","$40.008",""\n')
    tf = _read(csv, "Transactions.CSV")
    assert [r["amount"] for r in tf.rows] == [Decimal("2.11")]
    assert [(e.source_row, e.error_class) for e in tf.errors] == [(3, "NotATransaction")]
    assert "moves no money" in tf.errors[0].message


def test_excel_xml_spreadsheet_saved_as_xls() -> None:
    def row(*cells: str) -> str:
        return "<Row>" + "".join(f'<Cell><Data ss:Type="String">{c}</Data></Cell>' for c in cells) + "</Row>"

    xml = ('<?xml version="1.0"?><?mso-application progid="Excel.Sheet"?>'
           '<Workbook xmlns="urn:schemas-microsoft-com:office:spreadsheet" '
           'xmlns:ss="urn:schemas-microsoft-com:office:spreadsheet"><Worksheet ss:Name="Activity"><Table>'
           + row("Date", "Description", "Amount", "Currency")
           + row("2013-07-02", "ORDINARY DIVIDEND", "31.04", "CAD")
           + '<Row><Cell><Data ss:Type="String">2013-07-03</Data></Cell><Cell><Data ss:Type="String">FEE</Data>'
           '</Cell><Cell ss:Index="4"><Data ss:Type="String">CAD</Data></Cell></Row>'
           + row("2013-07-04", "MONEY MARKET PURCHASE", "-31.04", "CAD")
           + "</Table></Worksheet></Workbook>")
    tf = _read(xml, "activity.xls")
    assert [(r["timestamp"].date(), r["amount"], r["currency"]) for r in tf.rows] == [
        (date(2013, 7, 2), Decimal("31.04"), "CAD"), (date(2013, 7, 4), Decimal("-31.04"), "CAD")]
    assert [(e.source_row, e.error_class) for e in tf.errors] == [(3, "NotATransaction")]  # the cell skipped by Index


def test_budgeting_app_outflow_and_inflow_columns() -> None:
    csv = ('"Account","Date","Payee","Memo","Outflow","Inflow","Running Balance"\n'
           '"checking","2022/11/07","shop","Lunch","4.75","0.00","95.25"\n'
           '"checking","2022/11/08","employer","Salary","0.00","1000.00","1095.25"\n')
    tf = _read(csv, "ynab.csv", default_currency="EUR")
    assert not tf.errors
    assert [r["amount"] for r in tf.rows] == [Decimal("-4.75"), Decimal("1000.00")]


def test_original_currency_of_a_card_payment_is_not_the_accounts_currency() -> None:
    """'Original currency' is filled only for foreign card payments: the account's currency is not stated, so
    the rows keep it empty instead of each becoming 'the currency column is empty'."""
    csv = ('"Date";"Amount";"Original amount";"Original currency";"Description"\n'
           '"2024-12-30";"-3000.00";"";"";"Investment Broker"\n'
           '"2024-12-20";"-18.40";"-20.00";"USD";"Online shop"\n')
    tf = _read(csv, "neon.csv")
    assert not tf.errors
    assert [(r["amount"], r["currency"]) for r in tf.rows] == [(Decimal("-3000.00"), None), (Decimal("-18.40"), None)]
    assert tf.details["currency_unstated_rows"] == 2


def test_amount_debit_and_amount_credit_are_the_two_sides() -> None:
    """Both names hold 'amount'; the side word decides, so the credit is read, not taken for a row without money."""
    csv = "Date,Payee,Amount Debit,Amount Credit\n01/05/2018,VZWRLSS,-70.55,\n01/10/2018,DIRECT DEPOSIT,,500.00\n"
    tf = _read(csv, "2295.csv", default_currency="USD")
    assert not tf.errors
    assert [r["amount"] for r in tf.rows] == [Decimal("-70.55"), Decimal("500.00")]


def test_a_row_is_no_entry_in_units_while_a_money_column_the_layout_skips_holds_a_value() -> None:
    csv = ('"Date","Action","Quantity","Amount","Fee Amount"\n'
           '"11/20/2020","Dividend","","$2.11",""\n'
           '"11/14/2020","Fee","","","$1.50"\n')
    tf = _read(csv, "Transactions.CSV")
    assert [(e.source_row, e.error_class, e.message) for e in tf.errors] == [(3, "BadRow", "empty amount")]
