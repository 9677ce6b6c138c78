"""Column-name synonyms (several languages) mapped to canonical transaction roles.

Header names are normalised (lower case, accents removed, punctuation collapsed) and matched
exactly, so 'Naam' (own name) never captures 'Naam tegenpartij' (counterparty). A trailing
currency in parentheses, 'Betrag (EUR)', or a trailing currency code, 'Debit CHF', is matched as the money column
and yields the currency.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from pipeline.grounding.amounts import iso_currencies
from pipeline.ingest.values import COMMON_CURRENCIES, normalise_currency

# Role -> synonyms in priority order (the first present column wins where one column is needed).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "date": (
        "date", "datum", "buchungstag", "buchungsdatum", "transaction date", "booking date", "posting date",
        "posted date", "trans date", "completed date", "started date", "date operation", "date de l operation",
        "date comptable", "fecha", "fecha operacion", "data", "data operazione", "data operacji", "datum provedeni",
        "datum zauctovani", "dagtekening", "boekdatum", "transactiedatum", "datum transakcije", "дата операции",
        "дата", "дата проводки", "дата транзакции", "konyvelesi datum", "tranzakcio datuma", "datum transakce",
        "wertstellung", "valutadatum", "value date", "valuta date", "date valeur", "дата обработки", "buchung",
        "dato", "bokforingsdato", "bokføringsdato", "bokforingsdag", "transaktionsdatum", "bokföringsdatum",
    ),
    "amount": (
        "amount", "betrag", "umsatz", "bedrag", "montant", "importe", "importo", "kwota", "castka", "zauctovana castka",
        "transaction amount", "amount eur", "value", "сумма операции", "сумма", "сумма в валюте счета",
        "сумма пересчитанная в валюту счета", "osszeg", "iznos", "summe", "net amount", "total amount",
        # the booked amount (beside the original one in a foreign currency), Baltic/Polish/Nordic names, and last
        # the net of a payment processor's gross / fee / net: what moved the account ('Total' is not named here:
        # it may be a running total)
        "buchungsbetrag", "suma", "summa", "belop", "beløp", "belopp", "cash flow", "net",
    ),
    "debit": (
        "debit", "debet", "soll", "withdrawal", "withdrawals", "paid out", "money out", "ausgang", "belastung",
        "lastschrift", "debit amount", "списания", "списание", "расход", "terheles", "uitgaven", "af", "debito", "cargo",
        "addebiti", "addebito", "uscite", "dare", "obciazenia", "ut", "uttak", "outflow",
    ),
    "credit": (
        "credit", "haben", "deposit", "deposits", "paid in", "money in", "eingang", "gutschrift", "credit amount",
        "поступления", "поступление", "приход", "jovairas", "inkomsten", "bij", "credito", "abono",
        "accrediti", "accredito", "entrate", "avere", "uznania", "inn", "innskudd", "inflow",
    ),
    "currency": (
        "currency", "waehrung", "wahrung", "munt", "devise", "moneda", "divisa", "waluta", "mena", "mena uctu", "ccy",
        "currency code", "валюта операции", "валюта", "валюта счета", "penznem", "valuta", "valiuta",
        "buchungswahrung", "buchungswaehrung",
    ),
    "counterparty": (
        "counterparty", "payee", "empfaenger", "empfanger", "beguenstigter zahlungspflichtiger",
        "begunstigter zahlungspflichtiger", "zahlungsempfaenger", "zahlungsempfanger", "auftraggeber empfanger",
        "auftraggeber", "name", "naam tegenpartij", "tegenpartij", "naam", "nazev protiuctu", "beneficiary",
        "beneficiaire", "contrepartie", "merchant", "payer", "payer payee", "partner name", "recipient", "to from",
        "kontrahent", "odbiorca", "nadawca odbiorca", "beneficiario", "получатель", "контрагент", "partner neve",
        "merchant name", "gavejas", "mottaker", "mottakar",
    ),
    "description": (
        "description", "verwendungszweck", "omschrijving", "memo", "buchungstext", "purpose", "details", "narrative",
        "booking text", "payment purpose",
        "reference", "remittance information", "transaction details", "text", "zprava", "poznamka", "libelle",
        "libelle operation", "vrije mededeling", "mededelingen", "concepto", "causale", "tytul", "tytul operacji",
        "описание", "назначение платежа", "основание", "kozlemeny", "info", "transaktionstyp", "type", "action",
        "transaction type", "typ transakce", "notes", "note", "paaiskinimai", "beskrivelse", "tekst", "forklaring",
    ),
    "account": (
        "account", "account number", "account no", "iban", "auftragskonto", "rekeningnummer", "eigen rekening",
        "cislo uctu", "numero de compte", "cuenta", "conto", "rachunek", "numer rachunku", "номер счета",
        "номер карты счета договора", "account id", "account name", "szamlaszam", "own account",
        "rekening", "konto", "kontonummer", "account iban",
    ),
    # which way an unsigned amount moved: a column of debit/credit marks, or a true/false flag named for one side
    "direction": (
        "credit debit indicator", "debit credit indicator", "credit debit", "debit credit", "cr dr", "dr cr",
        "d k", "af bij", "is credit", "is debit",
    ),
}
# A line that sums the ones above it (a totals row, not a transaction).
_TOTAL_WORDS = r"total|totals|subtotal|summe|gesamt|totaal|totale|итого|всего"
TOTAL_LABEL = re.compile(rf"(?i)\b({_TOTAL_WORDS})\b")
# A line that states an account's balance at the start or end of the export (Italian, Spanish/Portuguese, French,
# English, German, Dutch, Lithuanian), not a movement.
_BALANCE_PHRASES = (r"saldo\s+(?:iniziale|finale|inicial|final|anterior|contabile)|solde\s+(?:initial|final)|"
                    r"(?:opening|closing|starting|ending)\s+balance|balance\s+(?:brought|carried)\s+forward|"
                    r"anfangssaldo|endsaldo|beginsaldo|eindsaldo|likutis\s+pradžiai|likutis\s+pabaigai")
BALANCE_LINE = re.compile(rf"(?i)\b({_BALANCE_PHRASES})\b")
# A row whose description is nothing but such a label (a turnover or balance line of a statement export:
# 'Apyvarta', 'Likutis pradžiai', 'Summe') sums or states the account, though it carries a date and an amount.
SUMMARY_LABEL = re.compile(rf"(?i)^\W*(?:{_TOTAL_WORDS}|apyvarta|turnover|{_BALANCE_PHRASES})\W*$")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def normalise_header(name: str) -> str:
    """'Beguenstigter/Zahlungspflichtiger ' -> 'beguenstigter zahlungspflichtiger'; Cyrillic kept."""
    s = _CAMEL.sub(" ", unicodedata.normalize("NFKD", name.strip().strip("\ufeff")))  # accountId -> account Id
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = re.sub(r"[^\w()\[\]]+", " ", s).replace("_", " ")
    return re.sub(r"\s+", " ", s).strip()


_INDEX: dict[str, tuple[str, int]] = {}
for _role, _names in SYNONYMS.items():
    for _rank, _n in enumerate(_names):
        _INDEX.setdefault(normalise_header(_n), (_role, _rank))


@dataclass
class ColumnMatch:
    """Which header columns carry which role, plus a currency named in a header."""

    roles: dict[str, list[int]] = field(default_factory=dict)  # role -> column indexes, priority order
    header_currency: str | None = None
    notes: list[str] = field(default_factory=list)  # how roles the header did not name were decided
    undecided: dict[str, list[int]] = field(default_factory=dict)  # role -> columns that could each hold it
    by_word: frozenset[int] = frozenset()  # columns whose role a word of their name gave: kept only if cells fit
    foreign_leg: frozenset[int] = frozenset()  # 'Original currency', 'Foreign amount': given no role from cells

    def first(self, role: str) -> int | None:
        cols = self.roles.get(role)
        return cols[0] if cols else None

    @property
    def score(self) -> int:
        """How transaction-like the header is: a date plus an amount (or debit/credit) is the core."""
        s = sum(1 for r in self.roles if self.roles[r])
        if "date" in self.roles and ("amount" in self.roles or "debit" in self.roles or "credit" in self.roles):
            s += 10
        return s


def synonym_role(name: str) -> str | None:
    """The role a header name is a synonym of (exactly, after normalising), or None."""
    hit = _INDEX.get(normalise_header(name))
    return hit[0] if hit else None


# Words that name a role inside a longer header ('Run Date', 'Date Processed', 'Buchungsbetrag' aside): tried only
# for cells no synonym matches, after every exact match. 'value' is left out: 'Value Date' is a date; so is 'net',
# an amount only as a whole name ('Net Asset Value' is none).
_ROLE_WORDS = {role: frozenset(normalise_header(n) for n in SYNONYMS[role] if " " not in n)
               - {"value", "data", "net"}
               for role in ("date", "amount", "currency")}
_ROLE_WORDS |= {"debit": frozenset({"debit", "debits", "debet", "withdrawal", "withdrawals", "outflow"}),
                "credit": frozenset({"credit", "credits", "deposit", "deposits", "inflow"})}
# The heads of compound words that name a role ('Wertstellungsdatum', 'Umsatzbetrag', 'Transactiebedrag'): German,
# Dutch and Nordic headers join the qualifier to the head word, so no synonym list can hold them all.
_COMPOUND_HEADS = {role: frozenset(w for w in words if len(w) >= 5) for role, words in _ROLE_WORDS.items()}
_CODE_AFTER_NAME = re.compile(r"^(.*?\S)[\s_-]+([A-Za-z]{3})$")  # 'Debit CHF', 'Betrag_EUR'
_UNIT_IN_PARENS = re.compile(r"^(.*?)\s*[\(\[]\s*([^\w\s]{1,3}|[A-Za-z]{3})\s*[\)\]]\s*$")  # 'Amount ($)'
_WORD_RANK = 1000  # below every synonym
_FOREIGN_LEG = frozenset({"original", "orig", "foreign"})


def match_columns(header: list[str]) -> ColumnMatch:
    """Assign roles to header cells by synonym; each column gets at most one role. A cell no synonym names takes
    the role a word of it names (date, amount, currency), or the head of a compound word names, ranked after the
    exact matches."""
    ranked: dict[str, list[tuple[int, int]]] = {}
    header_currency = None
    by_word: set[int] = set()
    foreign: set[int] = set()
    compound: dict[str, list[int]] = {}
    for idx, cell in enumerate(header):
        norm = normalise_header(cell)
        hit = _INDEX.get(norm)
        if hit is None and (m := _UNIT_IN_PARENS.match(cell.strip()) or _CODE_AFTER_NAME.match(cell.strip())):
            base = _INDEX.get(normalise_header(m.group(1)))
            unit = normalise_currency(m.group(2))
            # a unit in brackets is a sign or any ISO code ('Amount ($)', 'Betrag [BGN]'), never a word ('Amount
            # (fee)'); after a bare name only a common code counts ('Debit CHF', not 'Amount net')
            bracketed = ("(" in cell or "[" in cell) and (not m.group(2).isalpha() or unit in iso_currencies())
            if base and base[0] in ("amount", "debit", "credit") and (unit in COMMON_CURRENCIES or bracketed):
                hit = base
                header_currency = header_currency or unit
        if hit is None:
            words = set(re.sub(r"[()\[\]]", " ", norm).split())
            # 'Original currency' / 'Foreign amount' belong to a card payment's foreign leg, not to the account
            if words & _FOREIGN_LEG:
                foreign.add(idx)
                continue
            # 'Amount Debit' / 'Amount Credit' are the two sides, not two amounts: a side's word decides first
            # where the name says nothing else ('Credit Card Number' is no side)
            hit = next(((side, _WORD_RANK) for side in ("debit", "credit") if words & _ROLE_WORDS[side]
                        and not words - _ROLE_WORDS[side] - _ROLE_WORDS["amount"]), None) or next(
                ((role, _WORD_RANK) for role in ("date", "amount", "currency") if words & _ROLE_WORDS[role]), None)
            if hit is None and " " not in norm:
                hit = next(((role, _WORD_RANK + 1) for role in ("date", "amount", "currency")
                            if any(norm.endswith(h) and len(norm) >= len(h) + 3 for h in _COMPOUND_HEADS[role])), None)
                if hit is not None:
                    compound.setdefault(hit[0], []).append(idx)
            if hit is not None:
                by_word.add(idx)
        if hit is None:
            continue
        role, rank = hit
        ranked.setdefault(role, []).append((rank, idx))
    for role in ("amount", "currency"):  # 'Originalbetrag' and 'Buchungsbetrag': the head alone cannot choose
        if len(compound.get(role, ())) > 1:
            ranked[role] = [(rank, i) for rank, i in ranked[role] if i not in compound[role]]
            by_word -= set(compound[role])
    roles = {role: [i for _, i in sorted(v)] for role, v in ranked.items() if v}
    return ColumnMatch(roles=roles, header_currency=header_currency, by_word=frozenset(by_word),
                       foreign_leg=frozenset(foreign))
