"""Statement tables read from a filing's text: periods from the column header, the printed scale, negative numbers
in parentheses, row labels to US-GAAP concepts (pipeline.ingest.statement_tables)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.ingest.facts import FilingFact, current_period_fact
from pipeline.ingest.statement_tables import statement_facts

QUARTERLY = """ACME CORP
CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS
(in thousands, except per share data)
(unaudited)
Three Months Ended
June 30,
Six Months Ended
June 30,
2024 2023 2024 2023
Net product sales $ 1,200 $ 1,000 $ 2,300 $ 1,900
Total net sales 2,000 1,500 3,900 2,800
Operating income (loss) (150) 20 (310 ) 40
Net income (loss) $ (1,468) $ 8,113 $ (2,000) $ 9,000
Earnings per share:
Basic $ (0.66) $ 1.99 $ (0.90) $ 2.10
Diluted $ (0.66) $ 1.98 $ (0.90) $ 2.09
Weighted average shares outstanding:
Basic 4,154 4,079 4,150 4,070
Diluted 4,154 4,107 4,150 4,100
"""


def _by(facts: list[FilingFact], concept: str) -> dict[tuple[str | None, str | None], Decimal]:
    return {(f.period_start, f.period_end): f.value for f in facts if f.concept == f"us-gaap:{concept}"}


def test_periods_scale_and_parentheses_from_a_quarterly_statement() -> None:
    facts = statement_facts(["Table of Contents", QUARTERLY])
    revenue = _by(facts, "Revenues")
    assert revenue == {("2024-04-01", "2024-06-30"): Decimal(2_000_000), ("2023-04-01", "2023-06-30"): Decimal(1_500_000),
                       ("2024-01-01", "2024-06-30"): Decimal(3_900_000), ("2023-01-01", "2023-06-30"): Decimal(2_800_000)}
    assert _by(facts, "NetIncomeLoss")[("2024-04-01", "2024-06-30")] == Decimal(-1_468_000)
    assert _by(facts, "OperatingIncomeLoss")[("2024-01-01", "2024-06-30")] == Decimal(-310_000)  # "(310 )"
    eps = _by(facts, "EarningsPerShareDiluted")  # per-share amounts are not scaled
    assert eps[("2024-04-01", "2024-06-30")] == Decimal("-0.66") and eps[("2023-01-01", "2023-06-30")] == Decimal("2.09")
    shares = _by(facts, "WeightedAverageNumberOfDilutedSharesOutstanding")  # "Diluted" under the shares heading
    assert shares[("2023-04-01", "2023-06-30")] == Decimal(4_107_000)
    assert {f.page for f in facts} == {2} and {f.method for f in facts} == {"table"}
    assert {f.unit for f in facts if f.concept.endswith("Diluted")} == {"USD/shares"}
    current = current_period_fact(facts, "revenue", months=3)
    assert current is not None and current.value == Decimal(2_000_000) and current.period_end == "2024-06-30"


def test_contents_lines_and_prose_are_not_statements() -> None:
    toc = ("INDEX\nCondensed Consolidated Statements of Operations 3\nCondensed Consolidated Balance Sheets 4\n"
           "Our statements of operations include revenue of $ 5,000 and 4,000 for 2024 2023\n")
    assert statement_facts([toc]) == []


def test_markdown_table_on_one_line_and_full_dates() -> None:
    md = ("CONSOLIDATED STATEMENTS OF OPERATIONS\n(In millions, except number of shares, which are reflected in "
          "thousands, and per-share amounts)\n| Net sales: | | | Years ended September 28, 2024 | | | September 30, "
          "2023 | |:---|:--|--:|:--|--:| | Total net sales | | $ | 391,035 | | $ | 383,285 | | Net income | | $ | "
          "93,736 | | $ | 96,995 | | Other income/(expense), net | | | 269 | | | -565 | | Earnings per share: | | | "
          "| | | Diluted | | $ | 6.08 | | $ | 6.13 | | Shares used in computing earnings per share: | | | | | | "
          "Diluted | | | 15,408,095 | | | 15,812,547 |")
    facts = statement_facts([md])
    # a 52/53-week year starts the day after the year before it ends (September 30, 2023), not 12 months before
    assert _by(facts, "Revenues") == {("2023-10-01", "2024-09-28"): Decimal("391035e6"),
                                      ("2022-10-01", "2023-09-30"): Decimal("383285e6")}
    assert _by(facts, "EarningsPerShareDiluted")[("2023-10-01", "2024-09-28")] == Decimal("6.08")
    # shares carry their own printed scale (thousands), amounts theirs (millions)
    assert _by(facts, "WeightedAverageNumberOfDilutedSharesOutstanding")[("2023-10-01", "2024-09-28")] == Decimal(
        "15408095e3")


def test_parent_share_of_net_income_and_footnote_marks() -> None:
    text = ("CONSOLIDATED STATEMENTS OF INCOME\n(In millions except per share data)\nYear Ended December 31,\n"
            "2024 2023\nNet Operating Revenues 47,061 45,754\nConsolidated Net Income 10,649 10,703\n"
            "Less: Net income attributable to noncontrolling interests 18 (11)\n"
            "Net Income Attributable to Shareowners of The Coca-Cola Company $ 10,631 $ 10,714\n"
            "Basic Net Income Per Share 1 $ 2.47 $ 2.48\nDiluted Net Income Per Share (Note 12) $ 2.46 $ 2.47\n")
    facts = statement_facts([text])
    assert _by(facts, "NetIncomeLoss")[("2024-01-01", "2024-12-31")] == Decimal("10631e6")
    assert _by(facts, "EarningsPerShareBasic")[("2024-01-01", "2024-12-31")] == Decimal("2.47")
    assert _by(facts, "EarningsPerShareDiluted")[("2023-01-01", "2023-12-31")] == Decimal("2.47")
    assert _by(facts, "Revenues")[("2024-01-01", "2024-12-31")] == Decimal("47061e6")


def test_balance_sheet_columns_are_instants() -> None:
    text = ("CONDENSED CONSOLIDATED BALANCE SHEETS\n(In millions) (Unaudited)\nSeptember 30, 2023 June 30, 2023\n"
            "Cash and cash equivalents $ 80,452 $ 34,704\nTotal assets 445,785 411,976\nTotal liabilities 223,447 "
            "205,753\nTotal stockholders’ equity 222,338 206,223\nTotal liabilities and stockholders’ equity 445,785 "
            "411,976\n")
    facts = statement_facts([text])
    assert _by(facts, "Assets") == {(None, "2023-09-30"): Decimal("445785e6"), (None, "2023-06-30"): Decimal("411976e6")}
    assert _by(facts, "StockholdersEquity")[(None, "2023-09-30")] == Decimal("222338e6")


def test_a_header_without_periods_gives_no_facts() -> None:
    text = "CONSOLIDATED STATEMENTS OF OPERATIONS\n(In millions)\nRevenue 100 90\nNet income 10 9\nCost 5 4\nTax 1 1\n"
    assert statement_facts([text]) == []  # columns whose period is not printed are not guessed


REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "financial_text"


@pytest.mark.skipif(not REALDATA.exists(), reason="shared real data not present")
def test_msft_10q_pdf_headline_facts() -> None:
    from pipeline.ingest.pdf import PdfDocument, read_pdf

    p = REALDATA / "docugami_10Q_2023_Q3_MSFT.pdf"
    doc = read_pdf(p.read_bytes(), p.name)
    assert isinstance(doc, PdfDocument)
    facts = statement_facts(doc.pages)
    got = {h: current_period_fact(facts, h, months=3) for h in ("revenue", "net_income", "eps_diluted")}
    assert {h: (f.value, f.period_end, f.page) for h, f in got.items() if f} == {
        "revenue": (Decimal("56517e6"), "2023-09-30", 3), "net_income": (Decimal("22291e6"), "2023-09-30", 3),
        "eps_diluted": (Decimal("2.99"), "2023-09-30", 3)}


def test_the_currency_is_the_statements_own() -> None:
    text = ("CONSOLIDATED INCOME STATEMENT\n(in millions of euros, except per share data)\nYear ended December 31,\n"
            "2024 2023\nRevenue € 1,000 € 900\nNet income 100 90\nDiluted earnings per share € 1.10 € 0.99\n"
            "Operating income 150 120\n")
    facts = statement_facts([text])
    assert {f.unit for f in facts} == {"EUR", "EUR/shares"}
    bare = text.replace("€ ", "").replace("of euros", "")  # no currency printed: no unit invented
    assert {f.unit for f in statement_facts([bare])} == {None, "shares"} - {"shares"}


def test_basic_and_diluted_in_one_row_and_shares_under_their_heading() -> None:
    text = ("CONSOLIDATED STATEMENTS OF OPERATIONS AND COMPREHENSIVE LOSS\n(in thousands, except share and per share "
            "amounts)\nSix Months Ended June 30,\n2024 2023\nOperating expenses:\nResearch and development $ 18,000 "
            "$ 16,000\nLoss from operations (26,000) (25,000)\nNet loss attributable to common stockholders $ "
            "(25,028) $ (24,606)\nNet loss per share attributable to common stockholders, basic and diluted $ (1.42) "
            "$ (1.75)\nWeighted-average common shares outstanding:\nBasic and diluted 17,634,250 14,057,931\n")
    facts = statement_facts([text])
    assert _by(facts, "EarningsPerShareBasicAndDiluted") == {("2024-01-01", "2024-06-30"): Decimal("-1.42"),
                                                           ("2023-01-01", "2023-06-30"): Decimal("-1.75")}
    assert _by(facts, "NetIncomeLoss")[("2024-01-01", "2024-06-30")] == Decimal("-25028000")
    assert current_period_fact(facts, "eps_diluted", months=6).value == Decimal("-1.42")
    assert "us-gaap:EarningsPerShareDiluted" not in {f.concept for f in facts}  # the shares row is no EPS


@pytest.mark.timeout(20)
def test_prose_full_of_numbers_is_read_in_linear_time() -> None:
    """A consent's list of registration numbers once sent the figure-run regex into exponential backtracking (a
    real 10-K's page took minutes); figures are now read word by word from the end of the line."""
    line = "Form S-8 (Nos. " + ", ".join(f"333-{200000 + i}" for i in range(60)) + ") of 3M Company of our report"
    text = "CONSOLIDATED STATEMENTS OF INCOME\n(In millions)\nYear Ended December 31,\n2024 2023\n" + line + "\n"
    assert statement_facts([text * 50]) == []
    from pipeline.ingest.statement_tables import _row

    row = _row("Net income (loss) $ (1,468) $ 8,113 ( 174) —")
    assert row is not None and row.label == "Net income (loss)"
    assert row.values == [Decimal(-1468), Decimal(8113), Decimal(-174), None]


def test_per_share_rows_named_by_their_heading_and_an_entity_after_the_title() -> None:
    text = ("Consolidated Statements of Income Example Holdings Inc. and Subsidiaries\n(dollars in millions, except per "
            "share amounts)\nYears Ended December 31, 2018 2017\nTotal Operating Revenues 130,863 126,034\n"
            "Net Income $ 16,039 $ 30,550\nNet income attributable to noncontrolling interests $ 511 $ 449\n"
            "Net income attributable to Example 15,528 30,101\nBasic Earnings Per Common Share\n"
            "Net income attributable to Example $ 3.77 $ 7.37\nWeighted-average shares outstanding 4,128 4,084\n"
            "Diluted Earnings Per Common Share\nNet income attributable to Example $ 3.76 $ 7.36\n")
    facts = statement_facts([text])
    assert _by(facts, "EarningsPerShareDiluted")[("2018-01-01", "2018-12-31")] == Decimal("3.76")
    assert _by(facts, "EarningsPerShareBasic")[("2018-01-01", "2018-12-31")] == Decimal("3.77")
    assert _by(facts, "NetIncomeLoss")[("2018-01-01", "2018-12-31")] == Decimal("15528e6")
    assert _by(facts, "Revenues")[("2017-01-01", "2017-12-31")] == Decimal("126034e6")


def test_years_printed_twice_in_the_header_are_one_set_of_columns() -> None:
    text = ("Consolidated Statements of Operations\nYears ended December 31, 2021, 2020, and 2019\n2021 2020 2019\n"
            "(in millions, except per share amounts)\nTotal revenue 9,100 9,900 10,500\nCost of sales 7,000 7,500 8,000\n"
            "Operating income 2,100 2,400 2,500\nNet income $ 150 $ (20) $ 300\nDiluted earnings per share $ 0.22 $ (0.03)"
            " $ 0.45\n")
    facts = statement_facts([text])
    assert _by(facts, "Revenues") == {("2021-01-01", "2021-12-31"): Decimal("9100e6"),
                                      ("2020-01-01", "2020-12-31"): Decimal("9900e6"),
                                      ("2019-01-01", "2019-12-31"): Decimal("10500e6")}
    assert _by(facts, "NetIncomeLoss")[("2020-01-01", "2020-12-31")] == Decimal("-20e6")


def test_a_page_number_above_the_header_and_durations_that_do_not_divide_the_columns() -> None:
    # a transition period: two 12-month years and one 11-month period; only the first column's duration is certain
    text = ("Consolidated Statements of Earnings\n$ in millions, except per share amounts\n41\n12 Months Ended 11 Months "
            "Ended\nFiscal Years Ended January 30, 2016 January 31, 2015 February 1, 2014\nRevenue $ 39,500 $ 40,300 $ 38,200\n"
            "Gross profit 9,200 9,000 8,700\nOperating income 1,400 1,450 1,100\nNet earnings $ 800 $ 1,200 $ 500\n"
            "Diluted earnings per share $ 2.30 $ 3.40 $ 1.45\n")
    facts = statement_facts([text])
    assert _by(facts, "Revenues") == {("2015-02-01", "2016-01-30"): Decimal("39500e6")}
    current = current_period_fact(facts, "eps_diluted", months=12)
    assert current is not None and current.value == Decimal("2.30") and current.page == 1


COVER = ("UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nFORM 10-K\nANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d)\n"
         "For the fiscal year ended {end}\nCommission File Number 1-0000\nEXAMPLE CORP\n")
YEARS_ONLY = ("CONSOLIDATED STATEMENTS OF EARNINGS\n(Dollars in Millions Except Per Share Amounts) (Note 1)\n{years}\n"
              "Sales to customers $ 70,100 74,300 71,300\nGross profit 48,500 51,600 49,000\n"
              "Net earnings $ 15,400 16,300 13,800\nNet earnings per share Diluted $ 5.48 5.70 4.81\n")


def test_a_header_of_years_only_takes_the_period_end_the_cover_states() -> None:
    # a 52/53-week year ending in early January: only the current column's end is stated (on the cover)
    facts = statement_facts([COVER.format(end="January 3, 2016"), YEARS_ONLY.format(years="2015 2014 2013")])
    assert _by(facts, "Revenues") == {("2015-01-04", "2016-01-03"): Decimal("70100e6")}
    # a year ending on a month's last day: every column ends on that day of its year
    facts = statement_facts([COVER.format(end="December 31, 2015"), YEARS_ONLY.format(years="2015 2014 2013")])
    assert set(_by(facts, "NetIncomeLoss")) == {("2015-01-01", "2015-12-31"), ("2014-01-01", "2014-12-31"),
                                                ("2013-01-01", "2013-12-31")}
    # the cover's year is not the statement's latest column: no period is taken from it
    assert statement_facts([COVER.format(end="December 31, 2017"), YEARS_ONLY.format(years="2015 2014 2013")]) == []


def test_earnings_loss_labels_and_a_label_wrapped_under_a_per_share_heading() -> None:
    text = ("Consolidated Statements of Operations\nYears ended December 31, 2021 2020\n(in millions, except per share "
            "amounts)\nTotal revenue 9,100 9,900\nOperating income 2,100 2,400\nNet earnings (loss) attributable to "
            "Example Co. shareholders $ 150 $ (20)\nBASIC EARNINGS PER SHARE:\nIncome from continuing operations "
            "attributable to Example common stockholders, net\nof tax $ 0.20 $ (0.04)\nNET INCOME ATTRIBUTABLE TO EXAMPLE "
            "COMMON STOCKHOLDERS $ 0.23 $ (0.03)\nDILUTED EARNINGS PER SHARE:\nIncome from continuing operations "
            "attributable to Example common stockholders, net\nof tax $ 0.19 $ (0.04)\nNET INCOME ATTRIBUTABLE TO EXAMPLE "
            "COMMON STOCKHOLDERS $ 0.22 $ (0.03)\n")
    facts = statement_facts([text])
    year = ("2021-01-01", "2021-12-31")
    assert _by(facts, "NetIncomeLoss")[year] == Decimal("150e6")
    assert _by(facts, "EarningsPerShareDiluted")[year] == Decimal("0.22")  # the wrapped label is not a heading
    assert _by(facts, "EarningsPerShareBasic")[year] == Decimal("0.23")
    bestbuy_like = text.replace("Net earnings (loss) attributable to Example Co. shareholders",
                                "Net earnings (loss)").split("BASIC")[0] + "Diluted earnings (loss) per share $ 0.30 $ (0.02)\n"
    assert _by(statement_facts([bestbuy_like]), "EarningsPerShareDiluted")[year] == Decimal("0.30")


def test_income_attributed_to_redeemable_and_noncontrolling_interests_is_not_the_parents() -> None:
    text = ("Consolidated Statements of Earnings\n(In Millions, Except per Share Data)\nFiscal Year\n2019 2018\n"
            "Net sales $ 16,800 $ 15,700\nOperating profit 2,500 2,400\nNet earnings, including earnings attributable to "
            "redeemable and noncontrolling\ninterests 1,790 2,160\nNet earnings attributable to redeemable and "
            "noncontrolling interests 34 32\nNet earnings attributable to Example Mills $ 1,756 $ 2,128\n")
    cover = COVER.format(end="May 26, 2019")
    assert _by(statement_facts([cover, text]), "NetIncomeLoss")[("2018-05-27", "2019-05-26")] == Decimal("1756e6")


def test_a_title_and_labels_printed_one_word_per_line() -> None:
    # some PDFs print each word of a narrow label cell on its own line; the figures sit on the label's last line
    words = lambda text: "\n".join(text.split())  # noqa: E731
    text = "\n".join([
        words("EXAMPLE RESORTS INTERNATIONAL AND SUBSIDIARIES CONSOLIDATED STATEMENTS OF OPERATIONS"),
        "(In thousands, except per share data)", words("Year Ended December"), "31,", "2018 2017 2016",
        "Revenues", "Casino $ 5,753,150 $ 5,016,426 $ 4,108,126", "Rooms 2,212,573 2,152,741 2,003,027",
        "11,763,096 10,797,479 9,478,269", words("Operating income") + " 1,469,486 1,712,527 2,078,199",
        words("Net income") + " 583,894 2,088,184 1,235,846",
        "Less: Net income attributable to noncontrolling interests (117,122 ) (136,132 ) (135,438 )",
        words("Net income attributable to Example Resorts International") + " $ 466,772 $ 1,952,052 $ 1,100,408",
        words("Earnings per share"), "Basic $ 0.82 $ 3.38 $ 1.94", "Diluted $ 0.81 $ 3.34 $ 1.92",
        words("Diluted earnings per share"), "Continuing operations $ 0.70 $ 3.00 $ 1.50",
    ])
    year = ("2018-01-01", "2018-12-31")
    facts = statement_facts([COVER.format(end="December 31, 2018"), text])
    assert _by(facts, "NetIncomeLoss")[year] == Decimal("466772e3")  # the parent's share, its label re-joined
    assert _by(facts, "OperatingIncomeLoss")[year] == Decimal("1469486e3")
    assert _by(facts, "EarningsPerShareDiluted")[year] == Decimal("0.81")  # not the continuing-operations row


def test_an_annual_reports_columns_a_year_apart_without_a_duration_are_years() -> None:
    text = ("Consolidated Statements of Income\n(in millions, except per share data)\nAs Restated\nDecember 29,\n2018\n"
            "December 30,\n2017\nDecember 31,\n2016\nNet sales $ 26,268 $ 26,076 $ 26,300\nGross profit 8,921 9,033 9,146\n"
            "Operating income (loss) (10,205) 6,773 6,142\nNet income (loss) $ (10,192) $ 11,009 $ 3,632\n"
            "Diluted earnings per share $ (8.36) $ 8.95 $ 2.81\n")
    facts = statement_facts([COVER.format(end="December 29, 2018"), text])
    assert _by(facts, "Revenues") == {("2017-12-31", "2018-12-29"): Decimal("26268e6"),
                                      ("2017-01-01", "2017-12-30"): Decimal("26076e6"),
                                      ("2016-01-01", "2016-12-31"): Decimal("26300e6")}
    # a quarterly report's columns a year apart are not years: the header must say how long they are
    ten_q = ("FORM 10-Q\nQUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d)\nFor the quarterly period ended December 29, "
             "2018\nCommission File Number 1-0000\nEXAMPLE CORP\n")
    two = ("Consolidated Statements of Income\n(in millions)\nDecember 29,\n2018\nDecember 30,\n2017\n"
           "Net sales $ 26,268 $ 26,076\nGross profit 8,921 9,033\nOperating income 1,205 6,773\n"
           "Net income $ 1,192 $ 11,009\n")
    assert _by(statement_facts([COVER.format(end="December 29, 2018"), two]), "Revenues")  # annual: read
    assert statement_facts([ten_q, two]) == []


def test_slash_loss_labels_per_share_rows_named_basic_or_diluted_and_an_unlabelled_total() -> None:
    text = ("Consolidated Statements of Income\n(in millions, except per share data)\nDecember 29,\n2018\nDecember 30,\n"
            "2017\nRevenues\nProducts $ 20,000 $ 19,000\nServices 6,268 7,076\n26,268 26,076\n"
            "Operating income/(loss) (10,205) 6,773\nNet income/(loss) $ (10,254) $ 10,932\n"
            "Net income/(loss) attributable to noncontrolling interest (62) (9)\n"
            "Net income/(loss) attributable to Example Foods $ (10,192) $ 10,941\n"
            "Per share data applicable to common shareholders\nBasic earnings/(loss) $ (8.36) $ 8.98\n"
            "Diluted earnings/(loss) $ (8.36) $ 8.91\n")
    year = ("2017-12-31", "2018-12-29")
    facts = statement_facts([COVER.format(end="December 29, 2018"), text])
    assert _by(facts, "Revenues")[year] == Decimal("26268e6")  # the unlabelled total under "Revenues"
    assert _by(facts, "NetIncomeLoss")[year] == Decimal("-10192e6")
    assert _by(facts, "EarningsPerShareDiluted")[("2016-12-31", "2017-12-30")] == Decimal("8.91")
    assert _by(facts, "EarningsPerShareBasic")[year] == Decimal("-8.36")


@pytest.mark.parametrize("eps_lines", [
    # a heading wrapped after "attributable to", the entity on the next line
    "Earnings per common share attributable to\nExample Incorporated\nBasic $ 0.55 $ 1.11\nDiluted $ 0.54 $ 1.07",
    # the label on the line above its figures, a footnote mark before them
    "Basic Net Income Per Share\n1 $ 0.55 $ 1.11\nDiluted Net Income Per Share\n1 $ 0.54 $ 1.07",
    # basic/diluted after a comma
    "Net Income (Loss) Per Common Share, Basic $ 0.55 $ 1.11\nNet Income (Loss) Per Common Share, Diluted $ 0.54 $ 1.07",
    # a per-share row named by what it is per share of, under a heading that says diluted
    "Basic earnings per share\nNet earnings per share attributable to Example, Inc. $ 0.55 $ 1.11\n"
    "Diluted earnings per share\nNet earnings per share attributable to Example, Inc. $ 0.54 $ 1.07",
])
def test_per_share_rows_as_filings_print_them(eps_lines: str) -> None:
    text = ("Consolidated Statements of Income\n(In millions, except per share amounts)\nYear ended December 31,\n"
            "2020 2019\nNet sales $ 11,303 $ 11,503\nGross margin 3,531 3,883\nOperating income 509 1,306\n"
            f"Net income attributable to Example Incorporated $ 512 $ 960\n{eps_lines}\n")
    facts = statement_facts([text])
    assert _by(facts, "EarningsPerShareDiluted")[("2020-01-01", "2020-12-31")] == Decimal("0.54")
    assert _by(facts, "EarningsPerShareBasic")[("2019-01-01", "2019-12-31")] == Decimal("1.11")


def test_the_consolidated_statement_wins_over_a_summarized_one_of_the_same_year() -> None:
    summary = ("Summarized Statement of Income\nFor the Year Ended\nDecember 31, 2022\nNet sales $ 17,329\n"
               "Gross profit 5,775\nOperating income 2,100\nNet income 2,363\nOther 1\n")
    consolidated = ("Consolidated Statements of Income\n(in millions, except per share data)\nDecember 31, 2022 "
                    "December 25, 2021\nNet sales $ 26,485 $ 26,042\nGross profit 8,122 8,682\nOperating income 3,634 "
                    "5,460\nNet income attributable to Example Foods $ 2,363 $ 1,012\n")
    facts = statement_facts([COVER.format(end="December 31, 2022"), summary, consolidated])
    current = current_period_fact(facts, "revenue", months=12)
    assert current is not None and current.value == Decimal("26485e6") and current.page == 3


def test_rows_run_together_on_one_line_are_cut_apart() -> None:
    text = ("CONSOLIDATED STATEMENTS OF OPERATIONS\n(in thousands, except per share data)\nYear ended December 31,\n"
            "2022 2021\nRevenues $ 31,615,550 $ 29,697,844 Cost of revenues 19,168,285 17,332,683 Marketing 2,530,502 "
            "2,545,146\nOperating income 5,632,831 6,194,509\nNet income $ 4,491,924 $ 5,116,228\n"
            "Earnings per share: Basic $ 10.10 $ 11.55 Diluted $ 9.95 $ 11.24 Weighted-average common shares "
            "outstanding: Basic 444,698 443,155 Diluted 451,290 455,372\n")
    year = ("2022-01-01", "2022-12-31")
    facts = statement_facts([text])
    assert _by(facts, "Revenues")[year] == Decimal("31615550e3")
    assert _by(facts, "EarningsPerShareDiluted")[year] == Decimal("9.95")
    assert _by(facts, "EarningsPerShareBasic")[year] == Decimal("10.10")
    assert _by(facts, "WeightedAverageNumberOfDilutedSharesOutstanding")[year] == Decimal("451290e3")
