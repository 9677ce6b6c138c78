"""Bank CSV profiles: the shipped ones read the layouts they were written for (what detection alone gets wrong
or cannot read), a user's profile wins over them, and a broken profile fails before a run starts."""

from __future__ import annotations

import hashlib
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.config import RunConfig
from pipeline.ingest.profiles import SHIPPED_DIR, load_profiles, profile_for
from pipeline.ingest.transactions import TransactionFile, read_transactions

SHIPPED = load_profiles(SHIPPED_DIR)


def _read(text: str, name: str, profiles=SHIPPED, encoding: str = "utf-8", **kw: object) -> TransactionFile:
    data = text.encode(encoding)
    return read_transactions(data, name, hashlib.sha256(data).hexdigest(), profiles=profiles, **kw)  # type: ignore[arg-type]


PAYPAL = ('"Date","Time","TimeZone","Name","Type","Status","Currency","Gross","Fee","Net","From Email Address"\n'
          '"3/07/2024","10:01:02","PST","Ada Shop","Express Checkout Payment","Completed","USD","-20.00","0.00",'
          '"-20.00","me@example.com"\n'
          '"3/08/2024","11:00:00","PST","Bob","Payment Received","Completed","USD","100.00","-3.20","96.80",'
          '"bob@example.com"\n')


def test_paypal_activity_reads_net_amounts_with_or_without_its_profile() -> None:
    detected = _read(PAYPAL, "paypal-2024-03.csv", profiles=())  # gross / fee / net: the net moved the account
    assert not detected.errors and [r["amount"] for r in detected.rows] == [Decimal("-20.00"), Decimal("96.80")]
    tf = _read(PAYPAL, "paypal-2024-03.csv")
    assert not tf.errors
    assert [r["amount"] for r in tf.rows] == [Decimal("-20.00"), Decimal("96.80")]
    assert [r["timestamp"].date() for r in tf.rows] == [date(2024, 3, 7), date(2024, 3, 8)]
    assert [r["counterparty"] for r in tf.rows] == ["Ada Shop", "Bob"] and {r["currency"] for r in tf.rows} == {"USD"}
    assert "bank profile 'PayPal activity download'" in tf.details["notes"]


BUNQ = ('"Date";"Amount";"Account";"Counterparty";"Name";"Description"\n'
        '"2018-04-03";"-12,50";"NL00BUNQ0000000000";"NL00ABNA0000000000";"Albert Heijn";"boodschappen"\n'
        '"2018-04-05";"1.250,00";"NL00BUNQ0000000000";"";"Werkgever BV";"salaris"\n')


def test_bunq_export_gets_its_euro_from_the_profile() -> None:
    assert {r["currency"] for r in _read(BUNQ, "export.csv", profiles=()).rows} == {None}  # not an IBAN: no country
    tf = _read(BUNQ, "2018-04-14_10-52-13_bunq-transactieoverzicht.csv")
    assert not tf.errors and [r["currency"] for r in tf.rows] == ["EUR", "EUR"]
    assert [r["amount"] for r in tf.rows] == [Decimal("-12.50"), Decimal("1250.00")]
    assert [r["counterparty"] for r in tf.rows] == ["Albert Heijn", "Werkgever BV"]
    assert {r["account"] for r in tf.rows} == {"NL00BUNQ0000000000"}


ERSTE = ("Könyvelés dátuma;Tranzakció azonosító;Típus;Számlaszám;Számla név;Partner számlaszám;Összeg;Pénznem;"
         "x1;x2;x3;x4;x5;Közlemény;x6;x7\n"
         "2019.11.05.;T1;Kártya;11600006-00000000-12345678;Fő;;-4 990,00;HUF;;;;;;ALDI 123;;\n"
         "2019.11.06.;T2;Átutalás;11600006-00000000-12345678;Fő;;250 000,00;HUF;;;;;;Fizetés;;\n")


def test_erste_hungary_positions_dates_and_decimal_commas() -> None:
    tf = _read(ERSTE, "W80844_EBH_201945.202122.csv")
    assert not tf.errors
    assert [r["amount"] for r in tf.rows] == [Decimal("-4990.00"), Decimal("250000.00")]
    assert [r["timestamp"].date() for r in tf.rows] == [date(2019, 11, 5), date(2019, 11, 6)]
    assert [r["description"] for r in tf.rows] == ["ALDI 123", "Fizetés"]
    assert {r["currency"] for r in tf.rows} == {"HUF"}  # the currency column is still detected


CESKA = ("Číslo účtu;Datum;Částka;Protistrana;a;b;c;d;e;f;Popis\n"
         "123/0800;2018/05/20;-1 234,50;Kaufland;;;;;;;nákup\n")


def test_ceska_sporitelna_positional_columns() -> None:
    tf = _read(CESKA, "TH_20180101-20180520_strana_1.csv", default_currency="CZK")
    assert not tf.errors
    assert [(r["timestamp"].date(), r["amount"], r["counterparty"], r["description"]) for r in tf.rows] == [
        (date(2018, 5, 20), Decimal("-1234.50"), "Kaufland", "nákup")]


def test_user_profile_wins_over_the_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('name = "mine"\nfilename = "bunq"\ncurrency = "CHF"\n'
                                        '[columns]\ndate = 1\namount = 2\n', encoding="utf-8")
    profiles = load_profiles(tmp_path, SHIPPED_DIR)
    assert profile_for("2018-04-14_10-52-13_bunq-statement.csv", profiles).name == "mine"  # type: ignore[union-attr]
    tf = _read(BUNQ, "2018-04-14_10-52-13_bunq-statement.csv", profiles=profiles)
    assert {r["currency"] for r in tf.rows} == {"CHF"}


def test_profile_naming_a_missing_column_is_a_file_error_that_says_so(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('name = "typo"\nfilename = "paypal"\n[columns]\namount = "Netto"\n',
                                       encoding="utf-8")
    tf = _read(PAYPAL, "paypal.csv", profiles=load_profiles(tmp_path))
    assert [e.error_class for e in tf.errors] == ["UnrecognisedTable"]
    assert "bank profile 'typo'" in tf.errors[0].message and "Netto" in tf.errors[0].message


PAYPAL_OLD = ("Date, Time, Time Zone, Name, Type, Status, Amount, Receipt ID, Balance,\n"
              '"12/31/2016","23:59:59","PST","Some User","Payment Sent","Completed","-12.34","","0.00",\n'
              '"12/31/2016","23:59:59","PST","Bank Account","Add Funds from a Bank Account","Completed","12.34","",'
              '"12.34",\n')


def test_shipped_profile_that_does_not_fit_the_header_gives_way_to_detection() -> None:
    """A shipped profile is chosen by a file-name guess ('paypal'); an older PayPal layout without 'Net' is read
    by detection, the note saying why, instead of becoming one file error."""
    tf = _read(PAYPAL_OLD, "paypal_alternate.csv", default_currency="USD")
    assert not tf.errors
    assert [r["amount"] for r in tf.rows] == [Decimal("-12.34"), Decimal("12.34")]
    assert any("no column 'Net'" in n and "detected instead" in n for n in tf.details["notes"])


def test_broken_profile_fails_the_config_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text('name = "x"\nfilename = "(unclosed"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="broken.toml"):
        RunConfig(input_dir=tmp_path, bank_profile_dirs=[tmp_path])


def test_every_shipped_profile_is_exercised_here() -> None:
    names = {"2018-04-14_10-52-13_bunq-transactieoverzicht.csv", "W80844_EBH_201945.202122.csv",
             "TH_20180101-20180520_strana_1.csv", "paypal-2024-03.csv", "20180226-1000594757-umsatz.CSV"}
    assert {profile_for(n, SHIPPED).name for n in names} == {p.name for p in SHIPPED}  # type: ignore[union-attr]


REAL_SPARKASSE = (Path(__file__).resolve().parents[2] / "shared" / "realdata" / "transactions"
                  / "b2y_DE-Sparkasse__20180226-1000594757-umsatz.CSV")


@pytest.mark.skipif(not REAL_SPARKASSE.is_file(), reason="shared real data not present")
def test_real_sparkasse_export_through_its_profile() -> None:
    data = REAL_SPARKASSE.read_bytes()
    tf = read_transactions(data, REAL_SPARKASSE.name, "x", profiles=SHIPPED)
    assert "bank profile 'DE Sparkasse (CSV-CAMT export)'" in tf.details["notes"] and not tf.errors
    assert [(r["timestamp"].date(), r["amount"], r["currency"]) for r in tf.rows] == [
        (date(2018, 2, 22), Decimal("-36.99"), "EUR")]
