"""A filing's cover: form, registrant, period, file number, each from where the cover labels it."""

from __future__ import annotations

from pipeline.ingest.filing_cover import FilingCover, read_cover

TEN_Q = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
FORM 10-Q
☒ QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
For the Quarterly Period Ended September 30, 2023
Commission File Number 001-37845
MICROSOFT CORPORATION
WASHINGTON 91-1144442
"""

TEN_K = """FORM 10-K
(Mark One)
☒ ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d)
For the fiscal year ended September 28, 2024
Commission File Number: 001-36743
Apple Inc.
(Exact name of Registrant as specified in its charter)
"""

PROSPECTUS = """TABLE OF CONTENTS
Filed pursuant to Rule 424(b)(4)
Registration No. 333-282241
Prospectus
This is an initial public offering of shares of common stock by CAMP4 Therapeutics Corporation.
"""


def test_forms_registrants_and_periods() -> None:
    assert read_cover(TEN_Q) == FilingCover("10-Q", "MICROSOFT CORPORATION", "2023-09-30", "001-37845")
    assert read_cover(TEN_K) == FilingCover("10-K", "Apple Inc.", "2024-09-28", "001-36743")
    assert read_cover(PROSPECTUS) == FilingCover("prospectus", "CAMP4 Therapeutics Corporation", None, "333-282241")


def test_the_submission_header_form_wins_and_other_documents_are_not_filings() -> None:
    assert read_cover("Quarterly update\nRevenue grew.", form_hint="10-Q").form_type == "10-Q"
    assert read_cover("some text", form_hint="424B3").form_type == "prospectus"
    assert read_cover("INVOICE 2024-17\nACME GmbH\nTotal 12.00 EUR") is None
    # a form named inside prose is not the document's form
    assert read_cover("Our letter refers to your Form 10-K for 2023.\nRegards") is None
