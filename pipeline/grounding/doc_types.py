"""Which kind of document this is, from what it calls itself and what it does.

Each type has title words (what the document calls itself, in the languages the pipeline reads: "credit note",
"Gutschrift", "avoir") worth 3, and cues of what it does worth 1 each (a receipt records a payment made: cash
tendered, change given; a utility bill meters a supply: kWh, meter reading; a payslip pays a salary: gross pay,
net pay). The schema lets the model choose among the types with the best score (one, unless they tie); a document
that no type's title or cues add up for is `other`, never forced into a family it is not.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pipeline.grounding._common import Choice
from pipeline.grounding.labels import CASH_WORDS, CHANGE_WORDS

TITLE_WEIGHT, CUE_WEIGHT = 3, 1
# What counts as the top of the document for title words: a title that only appears in a footer or a reply e-mail
# ("Subject: RE: Invoice ...") says less than the heading.
HEAD_CHARS = 600

# What a sale settled at the counter prints: change handed back, cash tendered, "settled in cash". Written to survive
# OCR of thermal paper ("CHANGE RM. 12.90", "Change Amt 0.10", a label whose value sits in the column below).
# A lone letter before the figure is a misread sign; an O before the decimal mark a misread 0 ("Change RMO.00").
_MONEY = r"\W{0,4}(?:rm|\$|\u20ac|\u00a3|eur|dh|[^\W\d_])?\W{0,3}(?:\d+|[oO][.,]\d+)"
_CHANGE = rf"(?:{CHANGE_WORDS})(?:\s+(?:due|amt|amount|given))?"
_SETTLED = [
    rf"{_CHANGE}{_MONEY}",
    rf"^[^\S\n]*{_CHANGE}[^\S\n]*:?[^\S\n]*$",  # the label alone on its line, its value in the column below
    rf"(?:{CASH_WORDS})(?:\s+(?:received|tendered|paid))?{_MONEY}",
    r"cash\s+(?:received|tendered)",
    rf"(?:visa|master\s*card|amex|maestro|eftpos|(?:debit|credit)\s+card){_MONEY}",  # a card charged at the till
    r"tendered|(?:amount|amt|cash)\s+tendered|tender(?:ed)?\s+(?:amount|amt|cash)",
    r"r[e\u00e9]gl[e\u00e9]e?\s+(?:par|en)\s+(?:esp[e\u00e8]ces?|carte|ch[e\u00e8]que|cb)",
    r"cash\s+inv(?:oice)?",  # a cash invoice: the sale paid as it was made (Malaysia, India, the Philippines)
]

_TYPES: dict[str, tuple[list[str], list[str]]] = {
    "credit_note": ([r"credit\s+note", r"credit\s+memo", r"gutschrift", r"rechnungskorrektur", r"avoir",
                     r"facture\s+d['\u2019]avoir", r"creditnota", r"nota\s+de\s+cr[e\u00e9]dito", r"nota\s+di\s+credito",
                     r"nota\s+kredit"], [r"refund", r"credited", r"erstattung", r"rembourse\w*"]),
    "receipt": ([r"receipt", r"sales\s+receipt", r"cash\s+receipt", r"kassenbon", r"kassenbeleg", r"quittung",
                 r"re[\u00e7c]u", r"ticket\s+de\s+caisse", r"kassabon", r"recibo", r"ricevuta", r"scontrino", r"resit",
                 r"cash\s+bill", r"cash\s+sales?"],
                [*_SETTLED, r"paid\s+(?:by|with|in)\s+(?:cash|card|credit|debit|visa|master\s*card|amex|eftpos)",
                 r"(?:cashier|caissi[e\u00e8]re?|kassierer\w*|cajer[oa]|cassier[ea])(?:id|name)?", r"thank\s+you", r"come\s+again",
                 r"visa|master\s*card", r"rounding", r"counter", r"qty"]),
    "utility_bill": ([r"electricity\s+bill", r"gas\s+bill", r"water\s+bill", r"utility\s+bill", r"stromrechnung",
                      r"facture\s+d['\u2019][\u00e9e]lectricit[\u00e9e]", r"energierekening"],
                     [r"kwh", r"meter\s+reading", r"electricit[yé]", r"[\u00e9e]lectricit[\u00e9e]", r"compteur",
                      r"z[\u00e4a]hlerstand", r"consommation", r"consumption", r"verbrauch", r"point\s+de\s+livraison",
                      r"kva", r"tarif", r"meter"]),
    "payslip": ([r"pay\s*slip", r"salary\s+slip", r"earnings\s+statement", r"pay\s+stub", r"lohnabrechnung",
                 r"gehaltsabrechnung", r"entgeltabrechnung", r"bulletin\s+de\s+(?:paie|salaire)", r"fiche\s+de\s+paie",
                 r"loonstrook", r"n[o\u00f3]mina", r"busta\s+paga"],
                [r"gross\s+pay", r"net\s+pay", r"earnings", r"deductions", r"employee", r"employer", r"brutto",
                 r"netto", r"salaire", r"social\s+security", r"income\s+tax"]),
    "filing": ([r"form\s+10-?[kq]", r"\b10-?[kq]\b", r"form\s+8-?k", r"annual\s+report", r"quarterly\s+report",
                r"prospectus", r"securities\s+and\s+exchange\s+commission", r"gesch[\u00e4a]ftsbericht", r"jahresbericht",
                r"rapport\s+annuel", r"jaarverslag"],
               [r"fiscal\s+year", r"shareholders", r"registrant", r"item\s+\d+[a-z]?\.", r"risk\s+factors",
                r"md&a|management['\u2019]s\s+discussion"]),
    "bank_statement": ([r"bank\s+statement", r"account\s+statement", r"statement\s+of\s+account", r"kontoauszug",
                        r"relev[\u00e9e]\s+de\s+compte", r"rekeningafschrift", r"extracto\s+(?:de\s+cuenta|bancario)",
                        r"estratto\s+conto", r"statement"],
                       [r"closing\s+balance", r"opening\s+balance", r"balance\s+brought\s+forward", r"iban",
                        r"period", r"credits?", r"debits?"]),
    "kyc_notice": ([r"know[\s-]+your[\s-]+customer", r"\bkyc\b", r"request\s+for\s+information",
                    r"customer\s+due\s+diligence"],
                   [r"source\s+of\s+funds", r"identity\s+documents", r"under\s+review", r"compliance", r"restrict"]),
    "trade_confirmation": ([r"contract\s+note", r"trade\s+confirmation", r"confirmation\s+of\s+(?:trade|execution)",
                            r"abrechnung\s+wertpapier\w*", r"avis\s+d['\u2019]op[\u00e9e]r\w*"],
                           [r"isin", r"brokerage", r"settlement", r"consideration", r"trade\s+date", r"\bsell\b",
                            r"\bbuy\b"]),
    "research_note": ([r"research\s+note", r"equity\s+research", r"earnings\s+(?:preview|review)", r"initiation",
                       r"company\s+update"],
                      [r"rating", r"target", r"analyst", r"price\s+target", r"valuation", r"investors?"]),
    "invoice": ([r"invoice", r"tax\s+invoice", r"rechnung", r"[^\W\d_]{3,}rechnung", r"facture", r"factuur", r"factura", r"fattura", r"invois",
                 r"bill\s+of\s+supply"],
                [r"amount\s+due", r"balance\s+due", r"payment\s+terms", r"due\s+date", r"bill\s+to", r"zahlbar", r"[\u00e9e]ch[\u00e9e]ance", r"payable", r"invoice\s+(?:number|no|date)",
                 r"rechnungs\w+", r"factuur\w+", r"factur[ae]\w+"]),
}
OTHER = "other"


NUMBERED_TITLE_WEIGHT = 2  # "Gutschrift Nr. 12", "Receipt No. 2468": the type's name, as a number's label

_NUMBER_LABEL = r"[ \t]*(?:#|no\b|no\.|nr\b|nr\.|number|num\b|n[o\u00b0\u00ba]\b)"


@lru_cache(maxsize=1)
def _compiled() -> dict[str, tuple[list[re.Pattern[str]], list[re.Pattern[str]]]]:
    def rx(fragment: str) -> re.Pattern[str]:
        return re.compile(rf"(?<![^\W_])(?:{fragment})(?![^\W_])(?P<numbered>{_NUMBER_LABEL})?", re.I | re.M)

    return {t: ([rx(f) for f in titles], [rx(f) for f in cues]) for t, (titles, cues) in _TYPES.items()}


@lru_cache(maxsize=1)
def titled_line() -> re.Pattern[str]:
    """The start of a line that opens with a document's title and, optionally, its number ("Rechnung Nr. 77",
    "Beitragsrechnung", "Facture n° F-12"): what follows it on the line is the document's own (its date)."""
    titles = "|".join(f for titles, _ in _TYPES.values() for f in titles)
    number = r"(?:#|no\.?|nr\.?|n[\u00b0\u00ba]|number|num\.?|nummer)"
    return re.compile(rf"(?i)^\W*(?:{titles})(?![^\W_])(?:\s*{number}\s*:?\s*[^\s,;]+)?")


def _title_weight(titles: list[re.Pattern[str]], head: str, text: str) -> int:
    """A heading names the type (3); the name used as a number's label, or only further down, says less."""
    best = 0
    for t in titles:
        for m in t.finditer(head):
            best = max(best, NUMBERED_TITLE_WEIGHT if m["numbered"] else TITLE_WEIGHT)
    if not best and any(t.search(text) for t in titles):
        best = CUE_WEIGHT
    return best


# Cues that settle what a document did weigh twice: a sale settled at the counter (change, cash tendered), a card
# charged at the till, a cashier who rang it up. The counter ones decide against an invoice heading: shops in
# Malaysia, Singapore, Australia or India print "TAX INVOICE" on the slip the customer takes away.
SETTLING_CUES = {"receipt": len(_SETTLED) + 2}  # _SETTLED, then "paid by card" and the cashier
DECISIVE_CUES = {"receipt": len(_SETTLED)}
SETTLING_WEIGHT = 2
# A heading set with a space between letters ("K O S T E N R E C H N U N G"): the letters of one word.
_LETTER_SPACED = re.compile(r"(?<![^\W_])(?:[^\W\d_] ){3,}[^\W\d_](?![^\W_])")


def doc_type_scores(text: str) -> tuple[dict[str, int], set[str]]:
    """Evidence per type (title words in the document's head count fully, elsewhere as a cue), and the types
    whose decisive cues the document prints."""
    text = _LETTER_SPACED.sub(lambda m: m[0].replace(" ", ""), text)
    head = text[:HEAD_CHARS]
    scores, decisive = {}, set()
    for doc_type, (titles, cues) in _compiled().items():
        settling, deciding = SETTLING_CUES.get(doc_type, 0), DECISIVE_CUES.get(doc_type, 0)
        score = _title_weight(titles, head, text)
        for i, cue in enumerate(cues):
            if cue.search(text):
                score += SETTLING_WEIGHT if i < settling else CUE_WEIGHT
                if i < deciding:
                    decisive.add(doc_type)
        scores[doc_type] = score
    return scores, decisive


def doc_type_choice(text: str) -> Choice:
    scores, decisive = doc_type_scores(text)
    best = max(scores.values(), default=0)
    top = {t for t, s in scores.items() if s == best}
    # paid at the counter: a receipt, whatever its invoice heading (never a statement or a filing that mentions cash)
    if "receipt" in decisive and (best < TITLE_WEIGHT or top <= {"receipt", "invoice"}):
        return Choice(("receipt",), "strong", decided=True)
    if best < TITLE_WEIGHT:  # no type names itself, nor do enough cues add up to one that does
        return Choice((OTHER,), "none")  # a fallback, never sure: an unreadable page has no evidence either
    ranked = [t for t in scores if t in top]
    return Choice(tuple(ranked), "strong" if len(ranked) == 1 else "weak", decided=len(ranked) == 1)
