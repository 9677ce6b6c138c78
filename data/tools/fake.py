"""Seeded fake financial entities and locale-dependent formatting (names, IBANs, dates, amounts)."""

import random
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

COMPANY_HEADS = [
    "Alder", "Birch", "Cedar", "Delta", "Ember", "Fjord", "Granite", "Harbor", "Iris", "Juniper",
    "Kestrel", "Lumen", "Meridian", "Northwind", "Orion", "Pinnacle", "Quarry", "Riverside",
    "Summit", "Tidewater", "Umbra", "Vantage", "Willow", "Xenon", "Yarrow", "Zenith", "Atlas",
    "Beacon", "Cobalt", "Dunmore", "Everly", "Falcon", "Greystone", "Hollis", "Ironbridge",
    "Keller", "Lindqvist", "Marlowe", "Nordhaven", "Oakridge", "Prescott", "Rosenthal",
    "Sterling", "Thornbury", "Valmont", "Westbrook", "Aurora", "Bellweather", "Castellan",
    "Brightwater", "Halden", "Montclair", "Sandoval", "Vermeer", "Kowalski", "Dubois", "Moreau",
    "Jäger", "Grünwald", "Søndergaard", "Ibáñez", "Crédit Roux", "Löwen",
]
COMPANY_MIDS = [
    "Logistics", "Capital", "Systems", "Trading", "Analytics", "Foods", "Textiles", "Energy",
    "Software", "Consulting", "Holdings", "Partners", "Industries", "Pharma", "Media",
    "Robotics", "Shipping", "Retail", "Components", "Materials", "Securities", "Asset Management",
    "Office Supplies", "Print", "Engineering", "Freight", "Telecom", "Interiors", "Hosting",
]
COMPANY_SUFFIXES = ["GmbH", "Ltd", "S.A.", "Inc.", "B.V.", "AG", "plc", "LLC", "S.r.l.", "SAS", "AB", "Oy", "A/S", "KG", ""]
BANK_WORDS = ["Bank", "Sparkasse", "Savings Bank", "Banque", "Banca", "Trust", "Private Bank", "Credit Union"]
BROKER_WORDS = ["Securities", "Brokerage", "Markets", "Capital Markets", "Investment Services"]
RESEARCH_WORDS = ["Research", "Equity Research", "Investment Research", "Analytics", "Insights"]
FIRST_NAMES = [
    "Anna", "Ben", "Clara", "David", "Elena", "Felix", "Grace", "Hugo", "Ines", "Jonas", "Katrin",
    "Lucas", "Maria", "Noah", "Olivia", "Paul", "Quentin", "Rosa", "Stefan", "Tara", "Ulrich",
    "Vera", "William", "Yara", "Zoe", "José", "François", "Søren", "Björn", "Chloé", "Matthäus",
    "Agnieszka", "Åsa", "Renée", "Joaquín", "Mette", "Pieter", "Giulia", "Mehmet", "Priya",
    "Chen", "Aiko", "Omar", "Fatima", "Liam", "Ava", "Henrik", "Ingrid", "Marco", "Sofia",
]
LAST_NAMES = [
    "Müller", "Schmidt", "Dupont", "García", "Rossi", "Jensen", "Nowak", "Smith", "Johnson",
    "Brown", "Novak", "Kovács", "Andersson", "Nielsen", "de Vries", "Janssen", "Lefèvre",
    "Fernández", "Bianchi", "Weber", "Fischer", "O'Brien", "Murphy", "Costa", "Silva", "Horvat",
    "Berg", "Lindgren", "Hoffmann", "Wagner", "Becker", "Moreau", "Laurent", "Petit", "Ricci",
    "Kaya", "Patel", "Wang", "Tanaka", "Haddad", "Walsh", "Keane", "Olsen", "Virtanen", "Peeters",
]
STREETS = ["Main Street", "Hauptstraße", "Rue de la Paix", "Via Roma", "Kungsgatan", "Market Square",
           "Station Road", "Bahnhofstraße", "Avenue Louise", "Dorpsstraat", "High Street", "Ringstraße"]
CITIES = [("Berlin", "DE"), ("Munich", "DE"), ("Paris", "FR"), ("Lyon", "FR"), ("Milan", "IT"),
          ("Madrid", "ES"), ("Amsterdam", "NL"), ("Brussels", "BE"), ("Vienna", "AT"),
          ("Zurich", "CH"), ("Stockholm", "SE"), ("Copenhagen", "DK"), ("Oslo", "NO"),
          ("Warsaw", "PL"), ("Dublin", "IE"), ("London", "GB"), ("Lisbon", "PT"), ("Helsinki", "FI")]
IBAN_LENGTH = {"DE": 22, "FR": 27, "IT": 27, "ES": 24, "NL": 18, "BE": 16, "AT": 20, "CH": 21,
               "SE": 24, "DK": 18, "NO": 15, "PL": 28, "IE": 22, "GB": 22, "PT": 25, "FI": 18}
CURRENCIES = ["EUR", "EUR", "EUR", "USD", "USD", "GBP", "CHF", "SEK", "DKK", "NOK", "PLN"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]


def company(rng: random.Random, kind: str = "") -> str:
    """A company name; `kind` picks a bank/broker/research flavour."""
    head = rng.choice(COMPANY_HEADS)
    if kind == "bank":
        return f"{head} {rng.choice(BANK_WORDS)}" + rng.choice(["", " AG", " plc", " S.A.", ""])
    if kind == "broker":
        return f"{head} {rng.choice(BROKER_WORDS)}" + rng.choice([" Ltd", " AG", " LLC", " S.A.", ""])
    if kind == "research":
        return f"{head} {rng.choice(RESEARCH_WORDS)}" + rng.choice([" Ltd", " GmbH", " LLC", ""])
    name = f"{head} {rng.choice(COMPANY_MIDS)}"
    suffix = rng.choice(COMPANY_SUFFIXES)
    return f"{name} {suffix}".strip()


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def address(rng: random.Random) -> tuple[str, str]:
    """(street line, city line) and the country code as the city's."""
    city, cc = rng.choice(CITIES)
    return f"{rng.choice(STREETS)} {rng.randint(1, 220)}", f"{rng.randint(1000, 99999)} {city}, {cc}"


def iban(rng: random.Random, country: str | None = None) -> str:
    """A syntactically valid IBAN (mod-97 check digits), compact form."""
    cc = country or rng.choice(sorted(IBAN_LENGTH))
    bban = "".join(str(rng.randint(0, 9)) for _ in range(IBAN_LENGTH[cc] - 4))
    numeric = "".join(str(int(ch, 36)) for ch in bban + cc + "00")
    check = 98 - int(numeric) % 97
    return f"{cc}{check:02d}{bban}"


def show_iban(rng: random.Random, compact: str) -> str:
    """IBAN as printed: grouped by four (usual) or compact."""
    if rng.random() < 0.75:
        return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4))
    return compact


def rand_date(rng: random.Random, start: date = date(2019, 1, 1), days: int = 2500) -> date:
    return start + timedelta(days=rng.randrange(days))


DATE_STYLES = ("iso", "dmy_dot", "d_mon_y", "month_d_y", "d_month_y")


def fmt_date(d: date, style: str) -> str:
    if style == "iso":
        return d.isoformat()
    if style == "dmy_dot":
        return f"{d.day:02d}.{d.month:02d}.{d.year}"
    if style == "d_mon_y":
        return f"{d.day:02d} {MONTHS[d.month - 1][:3]} {d.year}"
    if style == "month_d_y":
        return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"
    if style == "d_month_y":
        return f"{d.day} {MONTHS[d.month - 1]} {d.year}"
    raise ValueError(style)


AMOUNT_STYLES = ("en", "de", "fr", "plain")


def fmt_amount(value: Decimal, style: str) -> str:
    """Amount with locale separators: en 1,234.50 / de 1.234,50 / fr 1 234,50 / plain 1234.50."""
    neg = value < 0
    cents = abs(value).quantize(Decimal("0.01"))
    whole, frac = f"{cents:.2f}".split(".")
    groups = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    groups.insert(0, whole)
    if style == "en":
        s = ",".join(groups) + "." + frac
    elif style == "de":
        s = ".".join(groups) + "," + frac
    elif style == "fr":
        s = " ".join(groups) + "," + frac
    elif style == "plain":
        s = "".join(groups) + "." + frac
    else:
        raise ValueError(style)
    return ("-" if neg else "") + s


def money(rng: random.Random, lo: float, hi: float) -> Decimal:
    """Random amount in [lo, hi) with cents, log-uniform so magnitudes vary."""
    import math

    v = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return Decimal(f"{v:.2f}")


def gold_amount(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01')):.2f}"


@dataclass(frozen=True)
class Locale:
    """Per-document presentation choices."""

    date_style: str
    amount_style: str
    ccy_before: bool


def pick_locale(rng: random.Random) -> Locale:
    return Locale(
        date_style=rng.choice(DATE_STYLES),
        amount_style=rng.choices(AMOUNT_STYLES, weights=[5, 3, 1, 1])[0],
        ccy_before=rng.random() < 0.5,
    )


def show_money(loc: Locale, ccy: str, value: Decimal) -> str:
    amt = fmt_amount(value, loc.amount_style)
    return f"{ccy} {amt}" if loc.ccy_before else f"{amt} {ccy}"
