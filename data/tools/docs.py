"""Seeded synthetic financial PDFs (five document types, varied layouts) with gold extractions.

Each builder draws the facts, writes a PDF with fpdf2 in one of several layouts and returns
the bytes together with the gold `DocumentExtraction` fields. Distractor values (due dates,
subtotals, opening balances, other references) make the labels, not position, decisive.
"""

import io
import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from data.tools import fake
from data.tools.fake import Locale, show_money

FONTS = ("Helvetica", "Times", "Courier")
FIXED_CREATION = datetime(2024, 1, 1, tzinfo=timezone.utc)  # fixed metadata keeps PDF bytes reproducible


@dataclass
class Doc:
    """One generated document: its PDF bytes, gold fields and generation notes."""

    pdf: bytes
    gold: dict[str, object]
    doc_type: str
    image_only: bool = False
    notes: dict[str, object] = field(default_factory=dict)


class Writer:
    """Thin layout helper over FPDF with a per-document font and spacing style."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pdf = FPDF(format=rng.choice(["A4", "Letter"]))
        self.pdf.set_creation_date(FIXED_CREATION)
        self.pdf.set_auto_page_break(True, margin=18)
        self.pdf.set_margins(rng.randint(14, 24), rng.randint(12, 20))
        self.font = rng.choice(FONTS)
        self.base = rng.choice([9, 10, 10, 11])
        self.sep = rng.choice([": ", ": ", " ", " - "])
        self.pdf.add_page()
        self.pdf.set_font(self.font, size=self.base)

    @property
    def width(self) -> float:
        return self.pdf.w - self.pdf.l_margin - self.pdf.r_margin

    def title(self, text: str, size_add: int = 6, align: str = "L") -> None:
        self.pdf.set_font(self.font, "B", self.base + size_add)
        self.pdf.cell(self.width, (self.base + size_add) * 0.6, text, align=align,
                      new_x="LMARGIN", new_y="NEXT")
        self.pdf.set_font(self.font, size=self.base)
        self.gap(2)

    def line(self, text: str, bold: bool = False, align: str = "L") -> None:
        self.pdf.set_font(self.font, "B" if bold else "", self.base)
        self.pdf.multi_cell(self.width, self.base * 0.5, text, align=align,
                            new_x="LMARGIN", new_y="NEXT")
        self.pdf.set_font(self.font, size=self.base)

    def kv(self, label: str, value: str, two_col: bool | None = None) -> None:
        if two_col is None:
            two_col = self.rng.random() < 0.5
        if two_col:
            w = self.width * 0.35
            self.pdf.set_font(self.font, "B", self.base)
            self.pdf.cell(w, self.base * 0.5, label)
            self.pdf.set_font(self.font, size=self.base)
            self.pdf.cell(self.width - w, self.base * 0.5, value, new_x="LMARGIN", new_y="NEXT")
        else:
            self.line(f"{label}{self.sep}{value}")

    def para(self, text: str) -> None:
        self.pdf.multi_cell(self.width, self.base * 0.5, text, new_x="LMARGIN", new_y="NEXT")
        self.gap(2)

    def gap(self, mm: float = 3) -> None:
        self.pdf.ln(mm)

    def table(self, header: list[str], rows: list[list[str]], widths: list[float]) -> None:
        scale = self.width / sum(widths)
        ws = [w * scale for w in widths]
        h = self.base * 0.55
        border = self.rng.choice([0, 1, "B"])
        self.pdf.set_font(self.font, "B", self.base - 1)
        for text, w in zip(header, ws):
            self.pdf.cell(w, h, text, border=border)
        self.pdf.ln(h)
        self.pdf.set_font(self.font, size=self.base - 1)
        for row in rows:
            for i, (text, w) in enumerate(zip(row, ws)):
                self.pdf.cell(w, h, text, border=border if border != "B" else 0,
                              align="R" if i > 0 and _numeric(text) else "L")
            self.pdf.ln(h)
        self.pdf.set_font(self.font, size=self.base)
        self.gap(2)

    def output(self) -> bytes:
        return bytes(self.pdf.output())


def _numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace(".", "").replace(" ", "").replace("-", "")
    return bool(stripped) and stripped[-2:].isdigit()


def _header(w: Writer, name: str, right: bool) -> None:
    street, city = fake.address(w.rng)
    align = "R" if right else "L"
    w.title(name, w.rng.choice([4, 6, 8]), align=align)
    w.line(street, align=align)
    w.line(city, align=align)
    if w.rng.random() < 0.5:
        w.line(f"VAT ID {city[-2:]}{w.rng.randint(100000000, 999999999)}", align=align)
    w.gap(4)


def _pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


def _ref(rng: random.Random, prefixes: tuple[str, ...], year: int) -> str:
    style = rng.randrange(4)
    p = rng.choice(prefixes)
    if style == 0:
        return f"{p}-{year}-{rng.randint(1, 99999):05d}"
    if style == 1:
        return f"{p}{rng.randint(100000, 9999999)}"
    if style == 2:
        return f"{year}/{rng.randint(1, 9999):04d}"
    return f"{p}/{year % 100:02d}/{rng.randint(100, 99999)}"


ITEMS = ["Consulting services", "Software licence", "Cloud hosting", "Office chairs", "Laptop stand",
         "Printer toner", "Freight charges", "Maintenance contract", "Training workshop", "Legal review",
         "Data subscription", "Translation services", "Audit fees", "Marketing campaign", "Server rack",
         "Cleaning services", "Travel expenses", "Catering", "Support hours", "Design work"]


def invoice(rng: random.Random) -> Doc:
    w = Writer(rng)
    loc = fake.pick_locale(rng)
    ccy = rng.choice(fake.CURRENCIES)
    issuer = fake.company(rng)
    customer = fake.company(rng) if rng.random() < 0.7 else fake.person(rng)
    d = fake.rand_date(rng)
    due = d + timedelta(days=rng.choice([14, 30, 45, 60]))
    number = _ref(rng, ("INV", "RE", "FA", "F", "IN"), d.year)
    acct = fake.iban(rng)
    n = rng.randint(1, 7)
    rows, subtotal = [], Decimal(0)
    for _ in range(n):
        qty = rng.randint(1, 12)
        unit = fake.money(rng, 5, 2500)
        line_total = unit * qty
        subtotal += line_total
        rows.append([rng.choice(ITEMS), str(qty), fake.fmt_amount(unit, loc.amount_style),
                     fake.fmt_amount(line_total, loc.amount_style)])
    rate = rng.choice([0, 7, 10, 19, 20, 21, 25])
    tax = (subtotal * rate / 100).quantize(Decimal("0.01"))
    total = subtotal + tax
    _header(w, issuer, rng.random() < 0.3)
    w.title(_pick(rng, "INVOICE", "Invoice", "Tax Invoice", "Commercial Invoice"), 4)
    bill = _pick(rng, "Bill to", "Billed to", "Customer", "Invoice to")
    blocks = [
        lambda: w.kv(_pick(rng, "Invoice No.", "Invoice number", "Invoice #", "Invoice ID"), number),
        lambda: w.kv(_pick(rng, "Invoice date", "Date of issue", "Date", "Issued"), fake.fmt_date(d, loc.date_style)),
        lambda: w.kv(_pick(rng, "Due date", "Payment due", "Pay by"), fake.fmt_date(due, loc.date_style)),
    ]
    if rng.random() < 0.4:
        blocks.append(lambda: w.kv(_pick(rng, "PO number", "Order ref", "Your reference"),
                                   f"PO{rng.randint(10000, 999999)}"))
    for b in blocks:
        b()
    w.gap()
    w.line(f"{bill}:", bold=True)
    w.line(customer)
    s2, c2 = fake.address(rng)
    w.line(f"{s2}, {c2}")
    w.gap()
    w.table(["Description", "Qty", "Unit price", "Amount"], rows, [50, 10, 20, 20])
    w.kv("Subtotal", show_money(loc, ccy, subtotal), two_col=True)
    w.kv(f"VAT {rate}%", show_money(loc, ccy, tax), two_col=True)
    w.kv(_pick(rng, "Total due", "Total", "Amount due", "Grand total", "Total payable"),
         show_money(loc, ccy, total), two_col=True)
    w.gap()
    bank = fake.company(rng, "bank")
    w.line(f"Please pay to {bank}, IBAN {fake.show_iban(rng, acct)}, BIC {_bic(rng)}.")
    w.line(_pick(rng, "Thank you for your business.", "Payment terms: net 30 days.",
                 "Late payments incur interest.", "Questions? Contact accounts@example.com."))
    gold = dict(doc_type="invoice", issuer=issuer, counterparty=customer, reference=number,
                date=d.isoformat(), currency=ccy, amount=fake.gold_amount(total), account=acct)
    return Doc(w.output(), gold, "invoice")


def _bic(rng: random.Random) -> str:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return "".join(rng.choice(letters) for _ in range(6)) + rng.choice(["2X", "FF", "MM", "XXX"])


TX_DESCRIPTIONS = ["Card payment", "Direct debit", "Standing order", "Transfer", "SEPA credit",
                   "Salary", "Rent", "ATM withdrawal", "Cash deposit", "Interest", "Fee", "Refund"]


def bank_statement(rng: random.Random, long: bool = False) -> Doc:
    w = Writer(rng)
    loc = fake.pick_locale(rng)
    ccy = rng.choice(fake.CURRENCIES)
    bank = fake.company(rng, "bank")
    holder = fake.person(rng) if rng.random() < 0.6 else fake.company(rng)
    end = fake.rand_date(rng)
    start = end - timedelta(days=rng.choice([29, 30, 90]))
    issued = end + timedelta(days=rng.randint(0, 5))
    number = _ref(rng, ("ST", "STMT", "AS", "KA"), end.year)
    acct = fake.iban(rng)
    opening = fake.money(rng, 10, 80000) * (1 if rng.random() < 0.9 else -1)
    bal = opening
    n = rng.randint(24, 34) if long else rng.randint(3, 10)
    rows = []
    for i in range(n):
        day = start + timedelta(days=int((end - start).days * (i + 1) / (n + 1)))
        amt = fake.money(rng, 3, 6000) * (1 if rng.random() < 0.35 else -1)
        bal += amt
        rows.append([fake.fmt_date(day, loc.date_style), f"{rng.choice(TX_DESCRIPTIONS)} {fake.company(rng).split()[0]}",
                     fake.fmt_amount(amt, loc.amount_style), fake.fmt_amount(bal, loc.amount_style)])
    _header(w, bank, rng.random() < 0.5)
    w.title(_pick(rng, "Account Statement", "Statement of Account", "Bank Statement", "Kontoauszug / Statement"), 4)
    w.kv(_pick(rng, "Statement no.", "Statement number", "Statement ref"), number)
    w.kv(_pick(rng, "Statement date", "Date of statement", "Issued on"), fake.fmt_date(issued, loc.date_style))
    w.kv(_pick(rng, "Account holder", "Customer", "Account name"), holder)
    w.kv("IBAN", fake.show_iban(rng, acct))
    w.kv("Currency", ccy)
    w.kv(_pick(rng, "Period", "Statement period"),
         f"{fake.fmt_date(start, loc.date_style)} - {fake.fmt_date(end, loc.date_style)}")
    w.gap()
    w.kv(_pick(rng, "Opening balance", "Balance brought forward"), fake.fmt_amount(opening, loc.amount_style), two_col=True)
    w.table(["Date", "Description", "Amount", "Balance"], rows, [22, 48, 18, 18])
    w.kv(_pick(rng, "Closing balance", "Balance carried forward", "New balance"),
         show_money(loc, ccy, bal), two_col=True)
    w.line(_pick(rng, "Please check this statement and report discrepancies within 30 days.",
                 "Deposits are protected up to the statutory limit.", "Thank you for banking with us."))
    gold = dict(doc_type="bank_statement", issuer=bank, counterparty=holder, reference=number,
                date=issued.isoformat(), currency=ccy, amount=fake.gold_amount(bal), account=acct)
    return Doc(w.output(), gold, "bank_statement", notes={"pages": w.pdf.page_no()})


KYC_REASONS = [
    "As part of our periodic know-your-customer review we ask you to confirm your identity documents and the source of funds.",
    "Our transaction monitoring has identified activity that requires additional information under anti-money-laundering rules.",
    "Regulations require us to keep customer due diligence records up to date. Please provide proof of address.",
    "We are required to verify the beneficial owners of your account. Please complete the enclosed declaration.",
]


def kyc_notice(rng: random.Random) -> Doc:
    w = Writer(rng)
    loc = fake.pick_locale(rng)
    inst = fake.company(rng, "bank")
    customer = fake.person(rng) if rng.random() < 0.7 else fake.company(rng)
    d = fake.rand_date(rng)
    case = _ref(rng, ("KYC", "AML", "CDD", "CASE"), d.year)
    acct = fake.iban(rng)
    has_tx = rng.random() < 0.55
    ccy = rng.choice(fake.CURRENCIES) if has_tx else None
    amt = fake.money(rng, 2000, 250000) if has_tx else None
    _header(w, inst, rng.random() < 0.5)
    w.title(_pick(rng, "Compliance Notice", "KYC Review Request", "Customer Due Diligence Notice",
                  "Request for Information"), 3)
    w.kv(_pick(rng, "Case reference", "Our reference", "Case ID", "Reference"), case)
    w.kv(_pick(rng, "Date", "Notice date", "Issued"), fake.fmt_date(d, loc.date_style))
    w.kv(_pick(rng, "Customer", "Client", "Account holder"), customer)
    w.kv(_pick(rng, "Account", "IBAN", "Account number"), fake.show_iban(rng, acct))
    w.gap()
    w.para(f"Dear {customer},")
    w.para(rng.choice(KYC_REASONS))
    if has_tx:
        txd = d - timedelta(days=rng.randint(3, 40))
        w.kv(_pick(rng, "Transaction under review", "Amount under review", "Flagged transaction"),
             show_money(loc, ccy, amt))
        w.kv(_pick(rng, "Transaction date", "Value date"), fake.fmt_date(txd, loc.date_style))
    deadline = d + timedelta(days=rng.choice([14, 21, 30]))
    w.para(f"Please respond by {fake.fmt_date(deadline, loc.date_style)}. If we do not hear from you, "
           f"we may restrict services on the account.")
    w.para(_pick(rng, "Yours sincerely,", "Kind regards,") + f"\n{fake.person(rng)}\nCompliance Department")
    gold = dict(doc_type="kyc_notice", issuer=inst, counterparty=customer, reference=case,
                date=d.isoformat(), currency=ccy, amount=fake.gold_amount(amt) if amt is not None else None,
                account=acct)
    return Doc(w.output(), gold, "kyc_notice")


SECURITIES = ["Alder Logistics", "Cobalt Energy", "Meridian Pharma", "Zenith Telecom", "Orion Robotics",
              "Summit Foods", "Vantage Software", "Harbor Shipping", "Granite Materials", "Lumen Media"]


def _isin(rng: random.Random) -> str:
    return rng.choice(["DE", "FR", "NL", "US", "GB", "IE", "LU"]) + "".join(
        rng.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(9)) + str(rng.randint(0, 9))


def trade_confirmation(rng: random.Random) -> Doc:
    w = Writer(rng)
    loc = fake.pick_locale(rng)
    ccy = rng.choice(fake.CURRENCIES)
    broker = fake.company(rng, "broker")
    client = fake.person(rng) if rng.random() < 0.5 else fake.company(rng)
    d = fake.rand_date(rng)
    settle = d + timedelta(days=2)
    ref = _ref(rng, ("TRD", "TC", "CNF", "T"), d.year)
    acct = rng.choice(["ACC", "CL", "DEP", "PF"]) + rng.choice(["-", ""]) + str(rng.randint(100000, 99999999))
    side = rng.choice(["BUY", "SELL"])
    qty = rng.randint(1, 5000)
    price = fake.money(rng, 1, 900)
    gross = price * qty
    fee = (gross * Decimal("0.0015")).quantize(Decimal("0.01")) + Decimal("4.90")
    net = gross + fee if side == "BUY" else gross - fee
    _header(w, broker, rng.random() < 0.4)
    w.title(_pick(rng, "Trade Confirmation", "Contract Note", "Confirmation of Execution"), 4)
    w.kv(_pick(rng, "Trade reference", "Confirmation no.", "Order ID", "Ref"), ref)
    w.kv(_pick(rng, "Trade date", "Execution date"), fake.fmt_date(d, loc.date_style))
    w.kv(_pick(rng, "Settlement date", "Value date"), fake.fmt_date(settle, loc.date_style))
    w.kv(_pick(rng, "Client", "Account holder", "Customer"), client)
    w.kv(_pick(rng, "Client account", "Account no.", "Depot"), acct)
    w.gap()
    sec = rng.choice(SECURITIES)
    w.table(["Side", "Security", "ISIN", "Quantity", "Price"],
            [[side, sec, _isin(rng), str(qty), fake.fmt_amount(price, loc.amount_style)]], [10, 30, 26, 14, 16])
    w.kv(_pick(rng, "Gross amount", "Consideration"), show_money(loc, ccy, gross), two_col=True)
    w.kv(_pick(rng, "Commission and fees", "Brokerage"), show_money(loc, ccy, fee), two_col=True)
    w.kv(_pick(rng, "Net settlement amount", "Net amount", "Total settlement"), show_money(loc, ccy, net), two_col=True)
    w.line("This confirmation is issued subject to the terms of business. Please report errors immediately.")
    gold = dict(doc_type="trade_confirmation", issuer=broker, counterparty=client, reference=ref,
                date=d.isoformat(), currency=ccy, amount=fake.gold_amount(net), account=acct)
    return Doc(w.output(), gold, "trade_confirmation")


RESEARCH_SENTENCES = [
    "Revenue growth accelerated in the last quarter, helped by pricing and a recovery in volumes.",
    "Margins remain under pressure from input costs, although management expects relief next year.",
    "We see the balance sheet as robust, with net debt well below the sector average.",
    "The new product line is ramping faster than expected and should support earnings.",
    "Competition in the core market has intensified, which we reflect in lower volume assumptions.",
    "Free cash flow conversion improved and the dividend looks well covered.",
    "Our valuation is based on a discounted cash flow model and a peer multiple cross-check.",
    "Key risks include regulatory changes, currency movements and execution on cost savings.",
    "Management reiterated guidance and announced a share buyback programme.",
    "We lower our estimates slightly but keep our view on the long-term growth story.",
]


def research_note(rng: random.Random) -> Doc:
    w = Writer(rng)
    loc = fake.pick_locale(rng)
    ccy = rng.choice(fake.CURRENCIES)
    house = fake.company(rng, "research")
    covered = fake.company(rng)
    d = fake.rand_date(rng)
    rid = _ref(rng, ("RN", "ER", "RES", "EQ"), d.year)
    target = fake.money(rng, 5, 800)
    price = (target * Decimal(str(rng.uniform(0.6, 1.3)))).quantize(Decimal("0.01"))
    rating = rng.choice(["BUY", "HOLD", "SELL", "OVERWEIGHT", "NEUTRAL"])
    _header(w, house, rng.random() < 0.3)
    w.title(f"{covered}: {rng.choice(['Initiation', 'Update', 'Quarterly review', 'Earnings preview'])}", 3)
    w.kv(_pick(rng, "Report ID", "Note ref", "Document no."), rid)
    w.kv(_pick(rng, "Published", "Date", "Report date"), fake.fmt_date(d, loc.date_style))
    w.kv("Analyst", fake.person(rng))
    w.kv("Rating", rating)
    w.kv(_pick(rng, "Price target", "Target price", "12m target"), show_money(loc, ccy, target))
    w.kv(_pick(rng, "Last close", "Current price", "Share price"), show_money(loc, ccy, price))
    w.gap()
    for _ in range(rng.randint(1, 3)):
        w.para(" ".join(rng.sample(RESEARCH_SENTENCES, rng.randint(2, 4))))
    w.line("This note is for professional investors only and is not investment advice.")
    gold = dict(doc_type="research_note", issuer=house, counterparty=covered, reference=rid,
                date=d.isoformat(), currency=ccy, amount=fake.gold_amount(target), account=None)
    return Doc(w.output(), gold, "research_note")


BUILDERS = {
    "invoice": invoice,
    "bank_statement": bank_statement,
    "kyc_notice": kyc_notice,
    "trade_confirmation": trade_confirmation,
    "research_note": research_note,
}


def image_only(rng: random.Random, text: str, gold: dict[str, object], doc_type: str) -> Doc:
    """Render `text` onto a scanned-looking bitmap page so the PDF has no text layer."""
    img = Image.new("L", (1240, 1754), color=rng.randint(235, 252))
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=22)
    y = 80
    for line in text.splitlines()[:60]:
        draw.text((70 + rng.randint(-3, 3), y), line, fill=rng.randint(10, 60), font=font)
        y += 28
    img = img.rotate(rng.uniform(-1.2, 1.2), fillcolor=240)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=45)
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_CREATION)
    pdf.add_page()
    pdf.image(io.BytesIO(buf.getvalue()), x=0, y=0, w=210, h=297)
    return Doc(bytes(pdf.output()), gold, doc_type, image_only=True)
