"""Candidates per field from where the document labels them (issue 38): the label tiers, the layouts values sit
in, the document's country deciding date order and currency, issuer and document-type candidates, and what the row
may call confident. Property-based where a printed format is involved."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.grounding import document_choices, field_confidence, is_grounded
from pipeline.grounding.amounts import amount_candidates, currency_candidates
from pipeline.infer.validate import decoding_schema


def fields(text: str) -> dict:
    return document_choices(text).fields


# ------------------------------------------------------------------ currency

def test_a_code_inside_a_company_suffix_is_no_currency_and_rm_is_ringgit() -> None:
    text = "MR D.I.Y. (JOHOR) SDN BHD\nCO-REG : 750441-W\nTOTAL RM 33.90\nCASH RM 50.00\nCHANGE RM 16.10"
    assert fields(text)["currency"].values == ("MYR",)
    assert "BHD" not in currency_candidates("KEDAI ABC SDN BHD\nTotal 12.00")


def test_a_symbol_is_read_in_the_documents_country_and_an_unprinted_currency_is_inferred_not_confident() -> None:
    assert currency_candidates("Summa 100,00 kr", "NO") == ["NOK"]
    assert currency_candidates("Summa 100,00 kr", "SE") == ["SEK"]
    # no sign printed, but the seller's registered IBAN is Hungarian: HUF, offered with null and never "decided"
    text = "Kiss Kft.\nSzámla\nIBAN HU42 1177 3016 1111 1018 0000 0000\nÖsszesen 12 500,00"
    choice = fields(text)["currency"]
    assert choice.values == ("HUF",) and choice.nullable and not choice.decided



@settings(deadline=None)  # the first example loads the CLDR and GeoNames tables
@given(city=st.sampled_from([("50480 Kuala Lumpur.", "MYR", "03/04/2018", "2018-04-03"),
                             ("43300 SERI KEMBANGAN, SELANGOR", "MYR", "03/04/2018", "2018-04-03"),
                             ("Springfield, IL 62701", "USD", "03/04/2018", "2018-03-04"),
                             ("75008 Paris", "EUR", "03/04/2018", "2018-04-03")]))
def test_the_city_of_a_postal_address_tells_the_country_when_nothing_else_does(city: tuple) -> None:
    address, currency, printed, iso = city
    text = f"KEDAI MAJU\nNo. 3, Jalan Besar\n{address}\nDate: {printed}\nTotal 12.00\nCup holder 48x230ml"
    assert fields(text)["currency"].values == (currency,)  # inferred, never confident
    assert not fields(text)["currency"].decided
    assert fields(text)["date"].values == (iso,)


def test_a_code_next_to_a_count_or_a_unit_is_no_currency() -> None:
    # "SUMMER CUP 48X230ML" is a product line, not Cuban pesos; "ALL 3KG" not Albanian lek
    assert currency_candidates("013 SUMMER CUP 48X230ML 9.00\nALL 3KG\nTotal 9.00") == []
    assert currency_candidates("CUP 48.50") == ["CUP"]

def test_a_code_after_an_item_code_is_no_currency() -> None:
    # "R3 GEL PEN": a product name, not Georgian lari; a figure before a code is an amount only when it is a number
    assert currency_candidates("M&G R3 GEL PEN 0.5MM 1 5.40 5.40\nTOTAL 5.40", "MY") == []
    assert currency_candidates("Total 12.00 EUR") == ["EUR"]
    assert currency_candidates("Summe 1 234,56 EUR") == ["EUR"]


# ------------------------------------------------------------------ dates

def test_a_french_invoice_reads_day_first_and_a_us_invoice_month_first() -> None:
    fr = "Facture n\u00b0 F-12\nDate de facture : 02/11/2019\nTVA intracom. FR 40 303 265 045\nTotal TTC 120,00 \u20ac"
    assert fields(fr)["date"].values == ("2019-11-02",)
    us = "Acme Inc.\n410 Terry Ave North, Seattle, WA 98109\nInvoice Date: 02/11/2019\nAmount due $4.11"
    assert fields(us)["date"].values == ("2019-02-11",)
    # the document's own unambiguous dates settle the order before any country does
    mixed = "Invoice Date: 02/11/2019\nDue Date: 25/11/2019\nTotal $5.00"
    assert fields(mixed)["date"].values == ("2019-11-02",)


def test_due_and_delivery_dates_are_not_the_document_date() -> None:
    text = "Invoice date: 03.03.2024\nDue date: 02.04.2024\nDelivery date: 01.03.2024"
    choice = fields(text)["date"]
    assert choice.values == ("2024-03-03",) and choice.decided
    only_due = fields("Payment due 02.04.2024")["date"]
    assert only_due.tier == "negative" and only_due.nullable and not only_due.decided



@settings(max_examples=40, deadline=None)
@given(day=st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2039, 12, 31)),
       title=st.sampled_from(["Rechnung Nr. R-2291 vom {d}", "Beitragsrechnung {d}", "Handelsrechnung Nr. 77 vom {d}",
                              "Invoice No. 5512 of {d}", "Facture n° F-12 du {d}"]))
def test_the_date_the_documents_title_line_prints_is_its_date(day: dt.date, title: str) -> None:
    """A title followed by its number and the date ("Rechnung Nr. 77 vom 30.10.2018") dates the document; a
    date after 'vom' in a sentence (a period of cover, a trip) is only a weak candidate beside it."""
    text = (f"Muster Versand GmbH\nDE 10369 Berlin\n{title.format(d=day.strftime('%d.%m.%Y'))}\n"
            "Leistung vom 02.01.1999\nZeitraum vom 03.01.1999 bis 04.01.1999\nSumme 12,00")
    choice = fields(text)["date"]
    assert choice.values == (day.isoformat(),) and choice.tier == "strong" and choice.decided
    sentence = fields("Muster Versand GmbH\nRechnung gemäß Fahrt vom 29.10.2018\nSumme 12,00")["date"]
    assert sentence.tier != "strong"


def test_hyphenated_german_date_labels_name_whose_date_it_is() -> None:
    """'Beleg-Datum' is the document's date; 'Vertrags-Datum' and 'Liefer-Datum' date a contract and a delivery
    (a hyphen joins the compound, so 'Datum' alone must not make them generic date labels)."""
    text = ("Vertrags-Datum : 01.04.2013\nBeleg-Nr : KR-1\nBeleg-Datum : 06.10.2013\n"
            "Liefer-Datum: 30.09.2013\nAuftrag-Datum-Lief : 02.04.2013\nSumme 12,00")
    choice = fields(text)["date"]
    assert choice.values == ("2013-10-06",) and choice.decided
    assert fields("Rechnungs-Datum: 05.03.2013\nSumme 12,00")["date"].tier == "strong"

_ORDERS = {"DE": ("%d.%m.%Y", "USt-IdNr. DE 123 456 789"), "US": ("%m/%d/%Y", "Seattle, WA 98109"),
           "GB": ("%d/%m/%Y", "VAT No. GB 123 4567 89")}


@settings(max_examples=60, deadline=None)
@given(day=st.dates(min_value=dt.date(1990, 1, 1), max_value=dt.date(2039, 12, 31)),
       country=st.sampled_from(sorted(_ORDERS)), label=st.sampled_from(["Invoice date:", "Date", "Rechnungsdatum"]))
def test_a_labelled_date_in_the_countrys_format_is_the_one_candidate(day: dt.date, country: str, label: str) -> None:
    fmt, evidence = _ORDERS[country]
    text = f"Example Trading Ltd\n{evidence}\n{label} {day.strftime(fmt)}\nDue date 01.01.2040"
    assert fields(text)["date"].values == (day.isoformat(),)


@settings(max_examples=40, deadline=None)
@given(day=st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2039, 12, 31)),
       spaced=st.sampled_from(["{d:02d}- {m:02d}-{y}", "{d:02d} / {m:02d} / {y}", "{d:02d}-{m:02d}- {y2:02d}",
                               "{d:02d}- {m:02d} {y}"]))
def test_a_date_that_ocr_spaced_out_is_still_a_date(day: dt.date, spaced: str) -> None:
    # thermal-paper OCR puts spaces around separators and drops one ("05- 03 2018 19: 02: 50")
    printed = spaced.format(d=day.day, m=day.month, y=day.year, y2=day.year % 100)
    text = f"KEDAI MAJU SDN BHD\n43300 Seri Kembangan, Selangor\nDate : {printed} 19: 02: 50\nTOTAL RM 4.00"
    assert fields(text)["date"].values == (day.isoformat(),)
    # a phone number or an item code is no date
    assert fields("Tel: 03- 62 2018\nJA01-04 - 2/60\nTOTAL RM 4.00")["date"].values == ()


@settings(max_examples=40, deadline=None)
@given(day=st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2039, 12, 31)),
       sep=st.sampled_from(["-", "/", "."]), time=st.sampled_from(["19:02:50", "9:05", "23:03:06"]))
def test_a_date_run_into_its_time_is_still_a_date(day: dt.date, sep: str, time: str) -> None:
    # a receipt's OCR drops the space between date and time ("10-03-201823:03:06")
    printed = f"{day.day:02d}{sep}{day.month:02d}{sep}{day.year}{time}"
    text = f"KEDAI MAJU SDN BHD\n43300 Seri Kembangan, Selangor\nDate {printed}\nTOTAL RM 4.00"
    assert fields(text)["date"].values == (day.isoformat(),)
    # six digits after the year with no time's colon stay no date
    assert fields("Ref 10-03-2018230306\nTOTAL RM 4.00")["date"].values == ()
    # year first: the time runs into the day ("Date:2018/02/2213:34:14")
    year_first = f"{day.year}{sep if sep != '.' else '/'}{day.month:02d}{sep if sep != '.' else '/'}{day.day:02d}{time}"
    text = f"KEDAI MAJU SDN BHD\n43300 Seri Kembangan, Selangor\nDate:{year_first}\nTOTAL RM 4.00"
    assert fields(text)["date"].values == (day.isoformat(),)


@settings(max_examples=40, deadline=None)
@given(sale=st.dates(min_value=dt.date(2005, 1, 1), max_value=dt.date(2035, 12, 31)),
       other=st.dates(min_value=dt.date(2005, 1, 1), max_value=dt.date(2035, 12, 31)),
       stamp=st.sampled_from(["{d:02d}-{m:02d}-{y} (Sun) 16:02", "{d:02d}-{m:02d}-{y2:02d} 21:49 SH03 T1",
                              "10:12AM 560272 {d:02d}-{m:02d}-{y2:02d}"]))
def test_an_unlabelled_date_printed_with_its_time_beats_a_stamp_and_a_period(sale: dt.date, other: dt.date,
                                                                             stamp: str) -> None:
    """No date is labelled: the till's time stamp is when the sale was made; a date printed without a time (a
    rubber stamp) says less, and the two ends of a period (an offer's) are no document's date."""
    printed = stamp.format(d=sale.day, m=sale.month, y=sale.year, y2=sale.year % 100)
    end = other + dt.timedelta(days=100)
    offer = f"{other.day} {other.strftime('%B')} {other.year} - {end.day} {end.strftime('%B')} {end.year}"
    text = (f"KEDAI MAJU SDN BHD\nPAID {other.day} {other.strftime('%b').upper()} {other.year}\nTOTAL RM 4.00\n"
            f"{printed}\nOFFER {offer}")
    assert fields(text)["date"].values == (sale.isoformat(),)
    # without a time stamp the stamp's date stays a candidate, the period's ends never
    text = f"KEDAI MAJU SDN BHD\nPAID {printed.split()[0] if ':' not in printed.split()[0] else printed.split()[2]}"
    assert fields(text)["date"].values == (sale.isoformat(),)
    assert fields(f"KEDAI MAJU\n{offer}")["date"].values == ()


# ------------------------------------------------------------------ amounts

_GROUPING = {"en": (",", "."), "de": (".", ","), "fr": ("\u00a0", ","), "ch": ("'", ".")}


def _printed(value: Decimal, style: str) -> str:
    group, dec = _GROUPING[style]
    whole, cents = f"{value:.2f}".split(".")
    groups = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    return group.join([whole, *groups]) + dec + cents


@settings(max_examples=80, deadline=None)
@given(total=st.decimals(min_value=Decimal("1.00"), max_value=Decimal("9999999.99"), places=2),
       style=st.sampled_from(sorted(_GROUPING)),
       label=st.sampled_from(["Amount due", "Grand total", "Gesamtbetrag", "Total TTC", "Te betalen", "TOTAL"]))
def test_the_labelled_total_is_chosen_over_subtotal_and_tax(total: Decimal, style: str, label: str) -> None:
    net = (total / Decimal("1.2")).quantize(Decimal("0.01"))
    tax = total - net
    text = (f"Widget 2 x {_printed(net / 2, style)}\nSubtotal {_printed(net, style)}\nVAT 20% {_printed(tax, style)}\n"
            f"{label}: {_printed(total, style)} EUR")
    choice = fields(text)["amount"]
    assert choice.values == (f"{total:.2f}",)


def test_header_row_over_value_row_and_label_above_value() -> None:
    text = ("Microsoft\nInvoice For: Alpine Ski House\nInvoice Number Invoice Date Invoice Due Date Charges VAT ID\n"
            "458176 3/28/2018 4/16/2018 $89,024.34 ET")
    f = fields(text)
    assert f["reference"].values == ("458176",) and f["date"].values == ("2018-03-28",)
    assert f["amount"].values == ("89024.34",)
    below = fields("Montant total\n62,86 \u20ac\nTVA 7,99 \u20ac")
    assert below["amount"].values == ("62.86",)


def test_a_balance_carried_over_is_not_this_invoices_total() -> None:
    text = "SUBTOTAL $100.00\nSALES TAX $10.00\nTOTAL $110.00\nPREVIOUS BALANCE $500.00\nTOTAL DUE $610.00"
    assert fields(text)["amount"].values == ("110.00",)


def test_net_plus_tax_proves_the_total_among_several_labelled_ones() -> None:
    text = "Total 2,287.50\nCGST 320.25\nSGST 320.25\nTotal 2,928.00\nRs. Two Thousand Nine Hundred Twenty Eight"
    choice = fields(text)["amount"]
    assert choice.values == ("2928.00",) and choice.decided




@pytest.mark.parametrize("paid", ["Amount Paid: $15,000.00", "Less: payment received $15,000.00",
                                  "Anzahlung 15.000,00", "Deposit paid 15,000.00"])
def test_an_amount_due_after_a_payment_is_not_the_invoice_total(paid: str) -> None:
    """Total 19,647.68, a payment of 15,000.00 already made, balance due 4,647.68: the invoice's total is the
    total (the schema's amount), not what is left to pay."""
    text = f"Subtotal: $17,861.32\nTax: $1,786.36\nTotal: $19,647.68\n{paid}\nBalance Due: $4,647.68"
    choice = fields(text)["amount"]
    assert choice.values == ("19647.68",)
    assert fields("Total: $19,647.68\nBalance Due: $19,647.68")["amount"].values == ("19647.68",)


def test_an_indian_intra_state_tax_split_in_equal_halves_proves_the_total() -> None:
    """CGST and SGST are equal halves of one GST: where text extraction set one half apart from its label, the
    total is still net + 2 x half."""
    text = "Total 2,287.50\n320.25\nCGST 320.25\nSGST\n1 NOS 2,928.00\nTotal E. & O.E"
    choice = fields(text)["amount"]
    assert choice.values == ("2928.00",) and choice.decided

@pytest.mark.parametrize("tax", ["Versicherungsteuer", "Umsatzsteuer", "Mehrwertsteuer"])
def test_a_german_compound_tax_line_proves_the_total(tax: str) -> None:
    """German names a tax as a compound ending in 'steuer': its line's figure is a tax for the net + tax = gross
    check, even where no label names the total."""
    text = (f"Öffnungszeiten 08.30 - 12.30 Uhr\nGesamtbeitrag 50,00 €\n{tax} 19 % 9,50 €\n"
            "Rechnungsbeitrag 59,50 €\nSonstiges 14,00 €")
    choice = fields(text)["amount"]
    assert choice.values == ("59.50",) and choice.decided

@settings(deadline=None)  # the first example loads the CLDR and GeoNames tables
@given(cents=st.integers(min_value=20, max_value=199_999),
       adjust=st.sampled_from([Decimal("-0.02"), Decimal("-0.01"), Decimal("0.01"), Decimal("0.02")]))
def test_the_rounded_total_that_was_paid_is_the_amount(cents: int, adjust: Decimal) -> None:
    # Malaysia, Switzerland, the Netherlands... round cash payments to 0.05: the page prints the total, the
    # adjustment and what was paid; the amount is the rounded figure, not the unrounded total.
    paid = Decimal(cents) * Decimal("0.05")
    total = paid - adjust
    text = f"Total (Inclusive of GST): {total}\nRounding Adj: {adjust}\nCASH : {paid:.2f}\nCHANGE : 0.00"
    choice = fields(text)["amount"]
    assert choice.values == (f"{paid:.2f}",) and choice.decided
    # no rounding line: the labelled total stays the amount
    assert fields(f"Total (Inclusive of GST): {total}\nCASH : {paid:.2f}")["amount"].values == (f"{total}",)


@settings(deadline=None)  # the first example loads the CLDR and GeoNames tables
@given(net=st.integers(min_value=100, max_value=99_999), rate=st.sampled_from([6, 10]),
       glued=st.booleans())
def test_the_proven_total_rounded_to_the_coin_is_the_amount(net: int, rate: int, glued: bool) -> None:
    # a generic "Total" labels the rounded figure; net + tax proves the unrounded one: what was paid is the
    # proven total rounded to the coin, when the page prints a rounding line (OCR may glue its words together)
    net_d = Decimal(net) / 100
    tax = (net_d * rate / 100).quantize(Decimal("0.01"))
    gross = net_d + tax
    paid = (gross / Decimal("0.05")).quantize(Decimal(1)) * Decimal("0.05")
    if paid == gross:
        return
    rounding = "RoundingAdjustment" if glued else "Rounding"
    text = (f"Item 1 {gross}\n(Excluded GST) Sub Total : {net_d}\nTotal GST : {tax}\n"
            f"{rounding} {paid - gross:.2f}\nTotal {paid:.2f}\nCASH : {paid:.2f}")
    assert fields(text)["amount"].values == (f"{paid:.2f}",)


def test_a_tax_summarys_net_and_tax_are_not_two_taxes_of_a_doubled_total() -> None:
    # "GST @6% 23.58 1.42" prints the net and the tax of the 25.00 paid: 50.00 = 25.00 + 23.58 + 1.42 is a chance
    # sum (taxes together as large as their net), and 50.00 is the cash tendered
    text = ("2 SubTotal 25.00\nNet Total 25. J\nC 50.00\nC. GE 25.00\nTax Summary Amt Tax\n"
            "SR:inclusive of GST @6% 23.58 1.42")
    assert fields(text)["amount"].values == ("25.00",)


def test_cash_tendered_minus_change_proves_the_amount_not_a_chance_sum() -> None:
    # 10.00 = 9.34 + 0.56 + 0.10 must not prove the cash as a total; 10.00 - 0.10 = 9.90 is what was paid
    text = ("6942131561507 1X 9.90 9.90\nTotal Incl. GSTa6X RM 9,90\nCASH RM 10.00\nCHANGE RM 0.10\n"
            "GST Summary Amt(RM) Tax(RM)\nGST S@6% 9,34 0.56")
    assert fields(text)["amount"].values == ("9.90",)


@pytest.mark.parametrize("case", [
    # OCR splits the decimals off at the line's end
    ("Max HD-10K Stapler 7.30 T\nTotal RM Incl. of GST 7. 30\nCash -10. 00\nCHANGE 2. 70", "7.30"),
    # the tax label OCR'd into junk between the total's label and its value
    ("TOTAL INCL. GSTR6Z RM 57,40\nCASH RM 100.00\nCHANGE RM 42.60\nGST @6% included in total RM 3.25", "57.40"),
    # a labelled zero is no document's amount; cash - change proves the paid one
    ("TOTAL SAVING: 0.00 TOTAL.\nCash 50.00\nCHANGE 24.15\nS=6% 0.00 0.00\nZe 0% 25.85 0.00", "25.85"),
    # a weak label the page's arithmetic contradicts: net + tax and cash - change both prove 29.68
    ("3122 29.68 29.68 SR\nTotal Sales (Inclusive of GST) : CN\nCASH : 29.68\nChange : 0.00\n"
     "Tax Code % Amt (RM) Tax (RM)\nSR 6 28.00 1.68\nTotal : 28.00 1.68", "29.68"),
    # the currency glued to its figure, and OCR gluing it to the label too: the rounded total paid
    ("Total (Incl GST, 0%) RM14.18\nRounding RM0.02\nGrand Tota1RM14.20\nTotal Paid RM20.20\nChange RM6.00", "14.20"),
    ("Total Amount: RM8.48\nRounding: RM0.02\nNett Total: RM8.50\nCASH RM8.50\nChange RM0.00", "8.50"),
])
def test_a_scanned_receipts_amount_survives_ocr_and_is_checked_by_its_arithmetic(case: tuple) -> None:
    text, amount = case
    assert fields(text)["amount"].values == (amount,)


def test_a_label_on_the_values_own_line_beats_the_header_row_above() -> None:
    # "BILL TO Invoice No:" reads as a row of labels, but the date below has its own "Invoice Date:"
    text = ("BILL TO Invoice No: #INV04096\nRobert West Invoice Date: 7/14/19\n913 Marcus Ways\n"
            "New Victor, TN 22416 Due Date: 09/12/19\nTotal $1,200.54")
    choice = fields(text)["date"]
    assert choice.values == ("2019-07-14",) and choice.decided
    # "Total GST" is the tax, not a generic "Total <word>"
    assert fields("Sub Total 10.94\nTotal GST 0.66\nTOTAL 11.60\nCASH 20.00")["amount"].values == ("11.60",)


def test_a_total_excluding_tax_is_not_the_amount() -> None:
    text = ("Total Sales (Excluding GST) : 78.00\nTotal GST : 4.68\nRounding : 0.00\n"
            "Total Sales (Inclusive of GST) : 82.68\nCASH : 100.00\nChange : 17.32")
    choice = fields(text)["amount"]
    assert choice.values == ("82.68",) and choice.decided




@given(cents=st.integers(min_value=1, max_value=9_999_999), code=st.sampled_from(["RM", "EUR", "USD", "SGD"]),
       label=st.sampled_from(["Total: ", "TOTAL ", "Amount due "]))
def test_a_currency_glued_to_its_figure_still_leaves_the_figure(cents: int, code: str, label: str) -> None:
    value = f"{Decimal(cents) / 100:.2f}"
    assert value in amount_candidates(f"{label}{code}{value}")
    assert amount_candidates(f"INV{value}") == []  # a letter prefix that is no currency is an identifier

@pytest.mark.parametrize("rate", ["@6.00%", "6.00 %", "@ 6,00%", "6.00\u00a0%"])
def test_a_rate_is_never_the_amount(rate: str) -> None:
    # OCR dropped the decimal point of "12.00" on the labelled line: its only two-decimal figure is the GST rate
    text = f"Total 12.00\nTotal Sales Inclusive GST {rate} 1200\nCash Received 50.00\nChange 38.00"
    assert "6.00" not in fields(text)["amount"].values
    assert amount_candidates(f"MwSt. {rate} 38,00") == ["38.00"]


# ------------------------------------------------------------------ references

def test_the_invoice_number_is_the_labelled_one_not_order_customer_or_vat_numbers() -> None:
    text = ("Order no 55501\nCustomer no.: 998877\nVAT ID DE123456789\nInvoice number: INV-7\n"
            "993548900Factuurnummer:")
    assert fields(text)["reference"].values == ("INV-7", "993548900")
    assert fields("Thank you 12345 for shopping")["reference"].values == ()  # no label: null, not a guess


@pytest.mark.parametrize("line", [
    "ROC No.: (1072825-A)", "BR No.:0195932-X", "(Co. No. 113825-W)", "CO.NO. 373665-A", "Company Reg #1101083-T",
    "(CO Reg :860671-D)", "Company Registration No. 08123456", "Registered in England No. 04123456",
    "GST REF NO : 001694261248", "(NO. ID GST: 002147033088 )", "Amtsgericht Hamburg HRB 123456",
    "St.-Nr. 22/815/08154", "RCS Paris B 423 093 459", "P.IVA 01234567890", "ABN 51 824 753 556",
])
def test_a_company_or_tax_registration_number_is_not_the_documents_number(line: str) -> None:
    """Registration numbers print "No." or "#" too; they identify the company, never the document."""
    assert fields(f"ACME TRADING SDN BHD\n{line}\nReceipt\nTotal 12.00")["reference"].values == ()
    assert fields(f"ACME TRADING SDN BHD\n{line}\nReceipt No: CS00087400\nTotal 12.00")["reference"].values == (
        "CS00087400",)


@pytest.mark.parametrize("address", ["No. 343, Jalan Kurau, Sungai Rengit,", "NO.12, JALAN PERMAS JAYA 10,",
                                     "LOT NO.:G1.116A,GROUND FLOOR,", "No. 9 Hill Street", "Nr. 5, Rue de la Paix"])
def test_the_number_of_a_street_address_is_not_the_documents_number(address: str) -> None:
    assert fields(f"ACME TRADING SDN BHD\n{address}\nTotal 12.00")["reference"].values == ()


@pytest.mark.parametrize("item", ["HOOK 1526# *S", "TISSUE HOLDER Z-66#*VS *S", "S/DRIVER 860 4# (+) *6730003*TR *S",
                                  "S/S COLANDER RH-008# 24.5CM *S", "MAGNETIC WHITEBOARD LD001# 120*90CM *S"])
def test_a_hash_after_an_item_code_marks_the_code_and_labels_no_number(item: str) -> None:
    """Shops print "#" after an article's code ("HOOK 1526#"): it labels neither the code nor what follows it.
    A "#" before a value, or after a label word with its colon ("Bill#: V001-540338"), still does."""
    assert fields(f"ACME TRADING SDN BHD\nTAX INVOICE\n{item}\nTotal 12.00")["reference"].values == ()
    assert fields(f"ACME TRADING SDN BHD\n{item}\nReceipt # 00118887\nTotal 12.00")["reference"].values == (
        "00118887",)
    assert fields("ACME TRADING SDN BHD\nBi11#:V001-540338\nTotal 12.00")["reference"].values == ("V001-540338",)


@pytest.mark.parametrize("number", ["INV/2023/03/0008", "INV-7", "INV04096", "inv_2291"])
def test_a_number_that_names_itself_an_invoices_is_a_reference_candidate(number: str) -> None:
    """"INV/2023/03/0008" under a bare title "Invoice": the number's own prefix says what it numbers."""
    assert fields(f"Invoice\n{number}\nAzure Interior\nTotal $112.00")["reference"].values == (number,)
    # a labelled number stays the one; a word that only starts like it ("INVENTORY 2291") is none
    assert fields(f"{number}\nInvoice No: 5512\nTotal $112.00")["reference"].values == ("5512",)
    assert fields("INVENTORY 2291\nTotal $112.00")["reference"].values == ()
    # the label glued to its number by OCR: the number alone, under its label
    assert fields("URBAN IDEA SDN BHD\nInvoice#1/A-42210-140220\nTotal 12.00")["reference"].values == (
        "1/A-42210-140220",)


def test_a_house_number_whose_street_follows_on_the_next_line_is_not_the_documents_number() -> None:
    text = "FUYI MINIMARKET\nNO 43-45-47G,\nTAMAN SEJATI,\n45600 BESTARI JAYA\nTotal 12.00"
    assert fields(text)["reference"].values == ()
    # a number whose line does not run on into an address keeps its label
    assert fields("FUYI MINIMARKET\nNo. CS-20242\nTAMAN SEJATI,\nTotal 12.00")["reference"].values == ("CS-20242",)


def test_a_title_line_heads_no_column_of_numbers_and_a_credit_note_number_is_the_reference() -> None:
    # "TAX INVOICE" is the title, not a row of labels over a row of values: the item code below is no number of it
    text = "MR. D.I.Y. (M) SDN BHD\nTAX INVOICE\nSOURING PAD 1018-4 4S *S\nTotal 11.20"
    assert fields(text)["reference"].values == ()
    text = "LIGHTROOM GALLERY SDN BHD\nCREDIT NOTE\nStation: CASHIER C/N No: LCN00211\nTOTAL : RM 39.80"
    assert fields(text)["reference"].values == ("LCN00211",)
    assert fields("ACME SDN BHD\nTax Invoice\nBilNo BM-161113\nTotal 12.00")["reference"].values == ("BM-161113",)


# ------------------------------------------------------------------ issuer

def test_issuer_candidates_are_names_never_labels_page_counters_addresses_or_the_customer() -> None:
    text = ("INVOICE\nSeite 1 von 1\nNordwind Handels GmbH\nHauptstra\u00dfe 7, 10115 Berlin\n"
            "Bill to: Blaubeer Logistik AG\nTelefon 030 1234567\nUst.-Betrag 19,00")
    choice = fields(text)["issuer"]
    assert choice.values[0] == "Nordwind Handels GmbH" and choice.decided
    joined = " | ".join(choice.values)
    for bad in ("INVOICE", "Seite", "Blaubeer", "Telefon", "Ust.-Betrag", "Hauptstra"):
        assert bad not in joined


def test_the_payee_of_a_remittance_block_is_the_issuer_and_a_county_is_no_name() -> None:
    text = ("Unit 4, Innovation Drive Phone: +44 (0)1234 567890\nN EXG E N Milton Keynes info@nexgen.co.uk\n"
            "Buckinghamshire\nBILL TO\nAlphaTech Solutions\nInvoice No. NG-INV-2025-00123\nTotal 4355.86\n"
            "REMIT PAYMENT TO\nNEXGEN\nUnit 4, Innovation Drive")
    choice = fields(text)["issuer"]
    assert choice.values[0] == "NEXGEN" and "Buckinghamshire" not in choice.values
    labelled = ("INVOICE ORIGINAL\nPAYABLE TO : INVOICE DATE | 12/20/2013\n"
                "LG Electronics MobileComm U.S.A, Inc. S/O NUMBER\nPost Office Box #100402\nBILL TO\nGOOGLE INC.")
    assert fields(labelled)["issuer"].values[0].startswith("LG Electronics MobileComm U.S.A, Inc.")


@settings(deadline=None)  # the first example loads the CLDR and GeoNames tables
@given(head=st.sampled_from([("HOME MASTER HARDWARE &", "ELECTRICAL", "HOME MASTER HARDWARE & ELECTRICAL"),
                             ("AIK HUAT HARDWARE ENTERPRISE (SETIA", "ALAM) SDN BHD",
                              "AIK HUAT HARDWARE ENTERPRISE (SETIA ALAM) SDN BHD"),
                             ("POPULAR BOOK", "CO. (M) SDN BHD", "POPULAR BOOK CO. (M) SDN BHD"),
                             ("MR D.1.Y. (JOHOR) SDN BHD", "", "MR D.I.Y. (JOHOR) SDN BHD")]))
def test_a_letterhead_name_set_over_two_lines_or_with_digits_in_its_initials_is_one_name(head: tuple) -> None:
    # a name continues when its line ends with "&" or an open parenthesis, or when the next line is its legal
    # form; OCR reads the I of an initialism as 1
    first, second, name = head
    text = f"{first}\n{second}\nNO. 3, JALAN BESAR\n43300 SERI KEMBANGAN\nTOTAL RM 4.00"
    assert fields(text)["issuer"].values[0] == name


@settings(deadline=None)  # the first example loads the CLDR and GeoNames tables
@given(printed=st.sampled_from(["SUN VICTORY SON BHD", "SUN VICTORY SDN BHO", "SUN VICTORY SUN BHD",
                                "SUN VICTORY S0N. BHD.", "SUN VICTORY SDN BHD", "SUN VICTORY SDNBHD"]))
def test_a_legal_form_misread_by_ocr_is_read_as_the_form(printed: str) -> None:
    # Tesseract reads D as O or U and D as O on thermal paper; the legal form is the field's vocabulary, so a
    # near-miss of it is the form itself (and the name's own words are left as printed)
    text = f"{printed}\n(No. 193573-M)\nLevel 62, Block D1\nTOTAL RM 4.00"
    assert fields(text)["issuer"].values[0] == "SUN VICTORY SDN BHD"
    assert fields("99 SPEED MART S/B (519537-X)\nLOT P.T. 2841, JALAN ANGSA\nTotal 4.00")["issuer"].values[0] == (
        "99 SPEED MART S/B")


@pytest.mark.parametrize("name", ["99 SPEED MART S/B", "7-Eleven Malaysia Sdn Bhd", "3M Deutschland GmbH"])
def test_a_legal_name_that_opens_with_a_figure_is_the_letterhead_issuer(name: str) -> None:
    # the first *letter* is the capital; the town-like line under the street is no rival candidate
    text = f"{name} (519537-X)\nLOT P.T. 2811, JALAN ANGSA,\nJAMAN BERKELEY\n41150 KLANG, SELANGOR\nTotal 22.90"
    choice = fields(text)["issuer"]
    assert choice.values == (name,) and choice.decided


def test_a_line_of_figures_over_the_letterhead_is_no_address_and_malay_business_words_are_legal_forms() -> None:
    # a till number read above the header ("3 18.01017") holds five digits but no town: the letterhead goes on
    text = "3 18.01017\nSYARIKAT PERNIAGAAN GIN KEE\n(81109-A)\nNO 290, JALAN AIR PANAS,\n53200 KUALA LUMPUR.\nTotal 9.00"
    choice = fields(text)["issuer"]
    assert choice.values == ("SYARIKAT PERNIAGAAN GIN KEE",) and choice.decided


def test_a_former_name_is_not_the_issuer() -> None:
    text = ("Gerbang Alaf Restaurants Sdn Bhd\n(65351-M)\nformerly known as\nGolden Arches Restaurants Sdn Bhd\n"
            "Level 6, Bangunan TH, Damansara Uptown3\n47400 Petaling Jaya\nTotal 28.50")
    assert fields(text)["issuer"].values == ("Gerbang Alaf Restaurants Sdn Bhd",)
    inline = "Acme Widgets Ltd\n(formerly Widget World Ltd)\n1 High Street\nLondon SW1A 1AA\nTotal 5.00"
    assert fields(inline)["issuer"].values == ("Acme Widgets Ltd",)


def test_a_seller_label_names_the_issuer() -> None:
    text = "Bill to Address:\nATTN: iViveLabs Limited\nService Provider:\nAmazon Web Services, Inc.\n410 Terry Ave"
    assert fields(text)["issuer"].values[0] == "Amazon Web Services, Inc."


def test_a_letterhead_name_beside_its_contact_details_and_never_a_rate_column() -> None:
    """Text extraction merges a letterhead's columns: the name is the part before 'Tel:' / 'E-Mail'. A column
    label with a percent sign ('Disc.%') is no name, even where it is among the first lines."""
    text = ("Nordlicht Fenster Tel: +49 (030) 41092-0\nWaldweg 86-90 Fax: +49 (030) 41092-111\n"
            "13403 Berlin email: info@nordlicht.example\nRechnung\nTotal 235,62")
    assert fields(text)["issuer"].values[0] == "Nordlicht Fenster"
    scrambled = "Invoice\nINV/2023/03/0008\nDescription\nQuantity\nUnit Price\nDisc.%\nTaxes\nAmount\n42.00"
    assert "Disc.%" not in fields(scrambled)["issuer"].values



def test_a_name_that_is_a_seller_word_with_its_legal_form_is_the_issuer() -> None:
    """'Lieferant GmbH' under the heading 'Rechnungsersteller': the word after the label is a company's name, not
    a second label (taking it for one leaves only 'GmbH', which names nobody)."""
    text = ("Rechnungsersteller\nLieferant GmbH\nLieferantenstraße 20 RECHNUNG\n80333 München Rechnungsnummer 4711\n"
            "Rechnungsempfänger\nKunden AG Mitte\nBrutto 235,62")
    choice = fields(text)["issuer"]
    assert choice.values == ("Lieferant GmbH",) and choice.decided


def test_the_holder_of_the_account_to_pay_into_is_the_issuer_but_not_a_direct_debit_payer() -> None:
    """Payment details naming the account holder name the payee (the issuer) when the letterhead names only the
    recipient; the holder of the account a direct debit draws on is the customer."""
    text = ("DUPONT CONSEIL\nMarie Dupont\n12 rue des Lilas\n69100 Villeurbanne\nFacture n° 2024-118\n"
            "Total TTC : 56,02 €\nVirement BANQUE EXEMPLE – Titulaire du compte : PRESSEPLUS\n"
            "IBAN : FR76 3000 6000 0112 3456 7890 189\nPRESSEPLUS\nSiège social : 1 rue X - 75001 Paris")
    assert fields(text)["issuer"].values[0] == "PRESSEPLUS"
    debit = ("DUPONT CONSEIL\nMarie Dupont\n12 rue des Lilas\n69100 Villeurbanne\nFacture n° 2024-118\n"
             "Le montant de 56,02 € sera prélevé sur le compte ci-dessous:\nTitulaire du compte : MARIE DUPONT\n"
             "IBAN : FR76 3000 6000 0112 3456 7890 189")
    assert "MARIE DUPONT" not in fields(debit)["issuer"].values
    statement = ("Nordbank\nBank Statement\nStatement no.: AS-2022-41\nAccount name: Aurora Materials SAS\n"
                 "IBAN: DE71 1358 4174 4191 2091 73\nBalance carried forward 1,356.51 EUR")
    assert "Aurora Materials SAS" not in fields(statement)["issuer"].values  # a statement names its customer


def test_a_name_that_spells_the_documents_own_domain_is_an_issuer_candidate() -> None:
    """'ZAPPIO' printed in the contact block of a bill whose addresses are zappio.fr names the issuer; a contact
    heading ('NOUS CONTACTER') is a label, a mail provider's or a software credit's domain names nobody."""
    text = ("NOUS CONTACTER\nN° client : 1 234 567\nPar Internet\nwww.zappio.fr\n"
            "mail : service@zappio.fr\nMME CLAIRE MARTIN\nZAPPIO SERVICE CLIENTS TSA 1234\n62978 ARRAS CEDEX\n"
            "Facture du 11/12/2022 Montant total 62,86 €\nPowered by TCPDF (www.tcpdf.org)\nkwh 300")
    choice = fields(text)["issuer"]
    assert choice.values[0] == "ZAPPIO" and "NOUS CONTACTER" not in choice.values and "TCPDF" not in choice.values
    head = "PIZZA ROMA EXPRESS\nOrder 12\nwww.pizzaroma.com.my\nrainbow@gmail.com RAINBOW\nTotal RM 12.00"
    values = fields(head)["issuer"].values
    assert values[0] == "PIZZA ROMA EXPRESS" and "RAINBOW" not in values
    # a customer's domain in the recipient's block is not the issuer's
    billed = "Invoice\nBILL TO\nAcme Widgets\nsales@acmewidgets.com\nTotal 12.00"
    assert "Acme Widgets" not in fields(billed)["issuer"].values

# ------------------------------------------------------------------ document types

def test_document_types_from_titles_and_cues_and_other_when_nothing_fits() -> None:
    receipt = "KEDAI MAJU SDN BHD\nTAX INVOICE\nQTY ITEM\n2 TEA 4.00\nTOTAL 4.00\nCASH 10.00\nCHANGE 6.00\nTHANK YOU"
    assert fields(receipt)["doc_type"].values == ("receipt",)
    assert fields("Gutschrift\nNr. G-12\nGesamtbetrag -233,47 \u20ac")["doc_type"].values == ("credit_note",)
    assert fields("Minutes of the board meeting held on 3 May")["doc_type"].values == ("other",)
    # a type's name used as a number's label says less than a heading: alone it is not enough
    assert fields("Receipt No.: 2468\nProject summary")["doc_type"].values == ("other",)
    assert fields("Receipt No.: 2468\nCASH 10.00\nCHANGE 2.00")["doc_type"].values == ("receipt",)
    schema = decoding_schema("document", "Gutschrift\nNr. G-12\nGesamtbetrag -233,47 \u20ac")
    assert schema["properties"]["doc_type"] == {"type": "string", "enum": ["credit_note"]}



@settings(deadline=None)  # the first example compiles every type's patterns
@given(
    head=st.sampled_from(["TAX INVOICE", "Tax Invoice", "INVOICE NO : 18396/102", "Simplified Tax Invoice"]),
    settled=st.sampled_from([
        "CASH RM 50.00\nCHANGE RM. 12.90",  # the amount after a currency sign with a stray dot (OCR)
        "CASH 100,00\nItem Count 7 Change Amt 0.10",  # the change amount after its own label word
        "Cash Received\nChange\n50.00\n12.90",  # a column of labels, the values below
        "Total Qty Tender :\nChange :\n2\n0.00",  # the change label with its colon over its column
        "REGLE PAR ESPECE 56.00 DH",  # French: settled in cash
        "Bar 20,00 EUR\nR\u00fcckgeld 2,50 EUR",  # German: cash tendered, change given
        "Paid by VISA 4.50\nThank you, please come again",
        "Visa RM 85.54\nShell Loyalty Card",  # a card charged at the till, the amount beside the scheme
        "Change Due s 70.10",  # the currency sign misread as a letter
        "Paid RM4.00\nChange RMO.00",  # a zero misread as the letter O
        "Cash Inv No.: 7012F715",  # a cash invoice: paid as the sale was made
    ]),
)
def test_a_sale_settled_at_the_counter_is_a_receipt_even_when_headed_tax_invoice(head: str, settled: str) -> None:
    # Shops in Malaysia, Singapore, Australia or India print "tax invoice" on the slip the customer takes away: what
    # the document did (cash tendered, change given, card charged) says it is the receipt of a paid sale.
    text = f"KEDAI MAJU SDN BHD\n{head}\n1 TEA 4.00\nTOTAL 4.00\n{settled}"
    assert fields(text)["doc_type"].values == ("receipt",)


def test_a_cashier_who_rang_up_the_sale_outweighs_a_numbered_invoice_title() -> None:
    text = ("SIZZLING GRILL\nDove Holdings Sdn Bhd\nTAX INVOICE NO 15\nDate: 26/05/2018 8:53:27 PM\nCashier: c001\n"
            "Tax Qty Code/Desc Unit Price Total RM\nSR 2 6.10 12.20\nRounding Adj : -0.01\nTOTAL: RM 164.80")
    assert fields(text)["doc_type"].values == ("receipt",)
    glued = "HARVEY NORMAN\nTotal Incl.Of GST 60.00\nSalesmanID CashierID CashierName\nKeep Receipt as proof of Purchase."
    assert fields(glued)["doc_type"].values == ("receipt",)


def test_counter_cues_decide_only_between_receipt_and_invoice() -> None:
    # a filing's "tender offer" and a statement's cash withdrawal are no sale settled at a counter
    filing = ("ACME CORP\nFORM 10-K\nANNUAL REPORT\nSECURITIES AND EXCHANGE COMMISSION\nItem 1A. Risk Factors\n"
              "The tender offer closed in May.")
    assert fields(filing)["doc_type"].values == ("filing",)
    statement = ("Example Bank\nAccount statement\nIBAN DE89 3704 0044 0532 0130 00\nOpening balance 1,000.00\n"
                 "03.05. CASH 200.00\nClosing balance 800.00")
    assert fields(statement)["doc_type"].values == ("bank_statement",)


def test_an_invoice_that_asks_for_payment_stays_an_invoice_and_letter_spaced_titles_are_read() -> None:
    invoice = ("ACME GmbH\nRECHNUNG\nRechnungsnummer: 12\nMenge Artikel Preis\n2 Beratung 200,00\n"
               "Gesamtbetrag 238,00 EUR\nZahlbar innerhalb 14 Tagen. Vielen Dank f\u00fcr Ihren Auftrag!")
    assert fields(invoice)["doc_type"].values == ("invoice",)
    spaced = "KOSTEN GMBH\nK O S T E N R E C H N U N G Seite 1\nBeleg-Nr : KR8765\nGesamtbetrag 238,00 EUR"
    assert fields(spaced)["doc_type"].values == ("invoice",)

# ------------------------------------------------------------------ grounded and confident

def test_grounded_means_taken_from_the_labelled_place_and_confident_means_no_choice_was_left() -> None:
    text = ("FACTUUR\nCoolblue B.V.\nFactuurnummer: 993548900\nFactuurdatum: 19 april 2014\nSubtotaal \u20ac 593,36\n"
            "BTW 21% \u20ac 124,61\nTotaal \u20ac 717,97\nBestelnummer 12572103")
    row = {"doc_type": "invoice", "issuer": "Coolblue B.V.", "counterparty": None, "reference": "993548900",
           "date": "2014-04-19", "currency": "EUR", "amount": "717.97", "account": None}
    assert is_grounded(row, text)
    # printed, but not where the document labels an invoice number or its total
    assert not is_grounded({**row, "reference": "12572103"}, text)
    assert not is_grounded({**row, "amount": "593.36"}, text)
    sure = field_confidence(row, text)
    assert all(sure[f] for f in ("doc_type", "reference", "date", "currency", "amount"))
    assert not sure["issuer"]  # never from the model path (measured: docs/eval/real-corpora.md)
    assert not field_confidence({**row, "amount": "124.61"}, text)["amount"]
    # read by OCR, only the type, the currency and the amount may be sure (calibrated on the receipt scans): a
    # misread digit changes a date or a number, so a scanned row always needs review
    scanned = field_confidence(row, text, ocr=True)
    assert {f for f, sure in scanned.items() if sure} == {"doc_type", "currency", "amount"}
