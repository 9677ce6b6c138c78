"""What documents print next to a field's value, in the languages the pipeline reads: the labels that say "this
is the amount due", "this is the invoice date", "this is the invoice number", and the labels that say a value is
something else (a subtotal, a due date, an order number).

The lexicons are the field's knowledge, not any vendor's layout: they hold the words invoices, receipts,
statements and notices use in English, German, French, Dutch, Spanish, Italian, Portuguese and Malay. Each label is
a regular-expression fragment matched case-insensitively with flexible spacing; where several labels start at one
place the longest wins, so "total incl. VAT" is one (strong) label and not "total" followed by "VAT".

Tiers, per field:
- strong: the label names this field exactly ("amount due", "invoice date", "invoice no.");
- weak: a generic label that usually means it ("total", "date", "invoice");
- negative: the value is another field ("subtotal", "due date", "order no.").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

STRONG, WEAK, NEGATIVE = "strong", "weak", "negative"
TIERS = (STRONG, WEAK, NEGATIVE)

# How a sale settled at the counter is printed: the cash handed over and the change given back. The receipt
# classifier reads them as cues; the amount's arithmetic as the paid amount (cash - change).
CASH_WORDS = r"cash|tunai|esp[e\u00e8]ces?|bargeld|bar|efectivo|contanti|contant"
CHANGE_WORDS = r"change|r[\u00fcu]ckgeld|wechselgeld|monnaie\s+rendue|rendu|wisselgeld|vuelto|kembalian"
ROUNDING_WORDS = r"rounding|round(?:ed)?\s+(?:off|adj\w*)|arrondi\w*|rundung\w*|afronding\w*|redondeo"

_AMOUNT = {
    STRONG: [
        r"amount\s+due", r"total\s+due", r"balance\s+due", r"amount\s+payable", r"total\s+(?:amount\s+)?payable",
        r"grand\s+total", r"gross\s+total", r"gross\s+amount", r"invoice\s+total", r"total\s+invoice(?:\s+amount)?",
        r"total\s+amount(?:\s+due)?", r"amount\s+to\s+(?:be\s+)?pa(?:y|id)", r"total\s+to\s+pay", r"please\s+pay",
        r"total\s*\(?\s*(?:incl|inclusive|including|inc|inkl)\w*[.,]?(?:\s+of)?(?:\s*(?:vat|tax|gst|sst|mwst|taxes))?",
        r"total\s+(?:sales|amount)\s*\(?\s*(?:incl|inclusive|including|inc)\w*[.,]?(?:\s+of)?(?:\s*(?:vat|tax|gst|sst))?",
        r"total\s+rounded", r"rounded\s+total", r"net\s+total\s+payable", r"nett\s+total", r"net\s+payable",
        r"total\s+payment", r"total\s+sales", r"total\s+charges", r"total\s+(?:current\s+)?charges",
        r"zu\s+zahlen(?:der\s+betrag)?", r"zahlbetrag", r"gesamtbetrag", r"rechnungsbetrag", r"endbetrag",
        r"bruttobetrag", r"gesamtsumme", r"rechnungssumme", r"summe\s+brutto", r"gesamt\s+brutto", r"brutto",
        r"total\s+ttc", r"montant\s+ttc", r"montant\s+total(?:\s+ttc)?", r"net\s+[\u00e0a]\s+payer",
        r"reste\s+[\u00e0a]\s+payer", r"[\u00e0a]\s+payer", r"total\s+[\u00e0a]\s+payer", r"facture\s+ttc",
        r"te\s+betalen", r"totaalbedrag", r"totaal\s+(?:incl|inclusief)\w*\.?(?:\s+btw)?", r"totaal\s+te\s+betalen",
        r"importe\s+total", r"total\s+a\s+pagar", r"total\s+factura", r"importe\s+a\s+pagar",
        r"totale\s+documento", r"totale\s+fattura", r"importo\s+totale", r"totale\s+da\s+pagare", r"da\s+pagare",
        r"valor\s+total", r"total\s+a\s+pagar", r"jumlah\s+(?:bayaran|besar|keseluruhan)",
        r"closing\s+balance", r"total\s+settlement", r"net\s+settlement", r"under\s+review", r"(?:12m\s+)?target",
    ],
    WEAK: [
        r"total", r"totaal", r"totale", r"gesamt", r"summe", r"betrag", r"montant", r"importe", r"amount",
        r"charges", r"sum", r"jumlah", r"total\s+price", r"total\s+[^\W\d_]+", r"balance",
    ],
    NEGATIVE: [
        r"sub\s*-?\s*total", r"subtotaal",
        r"total\s+(?:(?:sales|amount)\s*)?\(?\s*(?:exc\w*|before|w/o|without)\.?(?:\s+of)?(?:\s*(?:vat|tax|gst|sst))?\)?", r"zwischensumme", r"sous\s*-?\s*total", r"net\s+total", r"total\s+net",
        r"netto\w*", r"net\s+amount", r"net\s+value", r"taxable\s+(?:value|amount)", r"total\s+excl\w*\.?",
        r"excl\w*\.?(?:\s+(?:vat|tax|gst))?", r"hors\s+taxes?", r"total\s+ht", r"montant\s+ht", r"\bht\b",
        r"total\s+(?:vat|tax|gst|sst|mwst|tva|btw|iva)", r"(?:vat|tax|gst|sst|mwst|ust|tva|btw|iva|cgst|sgst|igst)\b",
        r"(?:vat|tax)\s+amount", r"steuer\w*", r"taxe?s?", r"discount\w*", r"rabatt", r"remise", r"descuento",
        r"rounding(?:\s+adj\w*)?", r"round(?:ing)?\s+(?:adj\w*|off)", r"change", r"cash", r"tender\w*",
        r"(?:already\s+)?paid(?:\s+amount)?", r"deposit", r"previous\s+balance", r"balance\s+(?:brought|carried)\s+forward",
        r"opening\s+balance", r"bereits\s+(?:bezahlt|gezahlt)", r"anzahlung", r"unit\s+price", r"price", r"qty",
        r"quantity", r"rate", r"pcs", r"total\s+(?:pcs|qty|quantity|items?|units?)", r"saved", r"savings",
        r"points?", r"current\s+price", r"consideration", r"brokerage", r"commission", r"fees?",
    ],
}

_DATE = {
    STRONG: [
        r"invoice\s+date", r"date\s+of\s+invoice", r"inv\.?\s+date", r"bill(?:ing)?\s+date", r"receipt\s+date",
        r"document\s+date", r"issue\s+date", r"date\s+of\s+issue", r"date\s+issued", r"issued(?:\s+on)?",
        r"invoice\s+dated", r"tax\s+point(?:\s+date)?", r"statement\s+date", r"trade\s+date", r"published",
        r"transaction\s+date", r"sales?\s+date", r"rechnungs?[\s-]?datum", r"beleg[\s-]?datum",
        r"ausstellungs[\s-]?datum",
        r"datum\s+der\s+rechnung", r"rechnung\s+vom", r"date\s+de\s+(?:la\s+)?facture", r"date\s+facture",
        r"date\s+d['\u2019]\s*[\u00e9e]mission", r"facture\s+du", r"factuurdatum", r"fecha\s+de\s+(?:la\s+)?factura",
        r"fecha\s+de\s+emisi[o\u00f3]n", r"fecha\s+factura", r"data\s+(?:della\s+)?fattura", r"data\s+documento",
        r"data\s+di\s+emissione", r"data\s+de\s+emiss[a\u00e3]o", r"tarikh(?:\s+invois)?", r"dated", r"date\s*/\s*time",
    ],
    WEAK: [r"date", r"datum", r"fecha", r"data", r"le", r"du", r"vom", r"on"],
    NEGATIVE: [
        r"due\s+date", r"(?:payment\s+)?due(?:\s+(?:by|on))?", r"payable\s+(?:on\s+or\s+)?(?:before|by)", r"pay\s+by",
        r"delivery\s+(?:note\s+)?date", r"delv\.?\s+date", r"deliver(?:y|ed)", r"ship(?:ping|ment)?\s+date",
        r"dispatch\w*\s+date", r"order\s+date", r"po\s+date", r"period", r"from", r"to", r"until", r"till",
        r"valid(?:ity)?(?:\s+(?:until|till|through|to))?", r"expir\w*", r"exp\.?", r"birth", r"check[\s-]*in",
        r"check[\s-]*out", r"value\s+date", r"service\s+date", r"service\s+period", r"training\s+date",
        r"coll\.?\s+date", r"respond\s+by", r"lieferdatum", r"leistungsdatum", r"leistungszeitraum",
        r"f[\u00e4a]llig\w*", r"zahlbar\s+bis", r"[\u00e9e]ch[\u00e9e]ance", r"date\s+d['\u2019]\s*[\u00e9e]ch[\u00e9e]ance",
        r"pr[\u00e9e]lev[\u00e9e]\s+le", r"prochaine\s+facture", r"vervaldatum", r"leverdatum",
        r"fecha\s+de\s+vencimiento", r"vencimiento", r"scadenza", r"data\s+di\s+scadenza", r"next\s+\w+",
        r"printed", r"print\s+date",
        r"[^\W\d_]{3,}-datum",  # "Vertrags-Datum", "Liefer-Datum": a date of something else (the document's above)
    ],
}

_REFERENCE = {
    STRONG: [
        r"invoice\s*(?:number|no\.?|nr\.?|num\.?|#|n[o\u00b0\u00ba]\.?|id)", r"inv\.?\s*(?:no|#|num)\.?",
        r"tax\s+invoice\s*(?:number|no\.?|#)", r"bill\s*(?:number|no\.?|#)", r"cash\s+bill\s*(?:number|no\.?|#)?",
        r"receipt\s*(?:number|no\.?|#)(?:\s*no\.?)?", r"credit\s*note\s*(?:number|no\.?|#)",
        r"document\s*(?:number|no\.?|#)", r"doc\.?\s*no\.?", r"statement\s*(?:number|no\.?)", r"case\s+reference",
        r"report\s+id", r"rechnungs?\s*-?\s*(?:nummer|nr\.?)", r"rechnung\s+nr\.?", r"beleg\s*-?\s*(?:nummer|nr\.?)",
        r"gutschrift\s*(?:nummer|nr\.?)", r"facture\s*n\s*[o\u00b0\u00ba]\.?", r"n\s*[o\u00b0\u00ba]\.?\s*(?:de\s*)?facture",
        r"num[e\u00e9]ro\s*de\s*facture", r"avoir\s*n\s*[o\u00b0\u00ba]", r"factuur\s*-?\s*(?:nummer|nr\.?)",
        r"creditnota\s*(?:nummer|nr\.?)", r"n[u\u00fa]mero\s*de\s*factura", r"factura\s*n\s*[o\u00b0\u00ba.]",
        r"n\s*[o\u00b0\u00ba]\.?\s*(?:de\s*)?factura", r"fattura\s*n\s*[o\u00b0\u00ba.]?", r"numero\s*fattura",
        r"no\.?\s+invois", r"invois\s+no\.?", r"booking\s+id", r"c/n\s*(?:no\.?|number|#)",
        r"bil\s*no\.?", r"no\.?\s*bil",  # Malay: "Bil No" (bill number)
    ],
    WEAK: [
        r"(?:tax\s+)?invoice",  # "TAX INVOICE" is one title, not a row of two labels heading a row of values
        r"facture", r"rechnung", r"factuur", r"factura", r"fattura", r"receipt", r"bill", r"ref\.?", r"reference",
        r"our\s+ref\.?", r"no\.", r"n[o\u00b0\u00ba]\.?", r"nr\.",
        # "#", but not the mark shops print after an article's code ("HOOK 1526#"), unless a colon follows it
        r"(?<!\d)#|#(?=\s*:)",
    ],
    NEGATIVE: [
        r"order\s*(?:number|no\.?|#|id)?", r"p\.?\s*o\.?\s*(?:number|no\.?|#)?", r"purchase\s+order",
        r"customer\s*(?:number|no\.?|#|id)", r"client\s*(?:number|no\.?|#|id)", r"account\s*(?:number|no\.?|#)?",
        r"a/?c\s*no\.?",
        r"(?:vat|tax|gst|sst)\s*(?:id|no|number|reg\w*|ref)?\.?(?:\s*(?:no\.?|number|#))?",
        r"no\.?\s*(?:id\s*)?(?:gst|sst)", r"gstin(?:/uin)?", r"tin", r"ust-?id\w*",
        r"siren", r"siret", r"kvk", r"iban", r"bic", r"swift", r"phone", r"tel\w*", r"fax", r"mobile", r"cell",
        r"ph\.?\s*no\.?", r"contract\s*(?:number|no\.?)?", r"kunden\s*-?\s*(?:nummer|nr\.?)", r"auftrags\w*",
        r"bestell\w*", r"n[o\u00b0\u00ba]\s*(?:de\s+)?client", r"klant\w*", r"member\w*", r"card\s*(?:no\.?)?",
        r"table", r"cashier", r"terminal", r"id#?", r"reg\.?\s*no\.?", r"pos\s*(?:no|id)?",
        # who the issuer is in a register (company, trade or tax number): "ROC No.", "Co. Reg", "HRB", "St.-Nr."
        r"(?:company|co\.?|business|br|roc|rob)\s*(?:reg(?:istration)?\.?\s*)?(?:no\.?|number|#)",
        r"(?:company|co\.?)[\s-]*reg(?:istration|istered)?\.?",
        r"registered\s+in\s+[^\W\d_]+(?:\s+(?:and|&)\s+[^\W\d_]+)?(?:\s+(?:no\.?|number))?",
        r"hr[ab]", r"st\.?\s*-?\s*nr\.?", r"steuer\s*-?\s*(?:nummer|nr\.?)", r"rcs", r"p\.?\s*iva",
        r"partita\s+iva", r"abn", r"acn", r"cin", r"nif", r"cif",
    ],
}

FIELD_LABELS: dict[str, dict[str, list[str]]] = {"amount": _AMOUNT, "date": _DATE, "reference": _REFERENCE}

# What a label means can depend on the kind of document: a statement's "balance carried forward" is its closing
# balance (on an invoice, an older debt); a contract note's "net amount" is what settles (on an invoice, the total
# before tax); a KYC notice's "transaction date" is not the notice's date. These win over FIELD_LABELS for
# documents of that type (the type is chosen first, `pipeline.grounding.doc_types`).
TYPE_LABELS: dict[str, dict[str, dict[str, list[str]]]] = {
    "bank_statement": {
        "amount": {STRONG: [r"balance\s+carried\s+forward", r"new\s+balance", r"ending\s+balance", r"neuer\s+saldo",
                            r"nouveau\s+solde", r"nieuw\s+saldo", r"saldo\s+final"],
                   NEGATIVE: [r"balance\s+brought\s+forward", r"opening\s+balance", r"previous\s+balance"]},
        "date": {STRONG: [r"date\s+of\s+statement", r"statement\s+date"]},
        "reference": {STRONG: [r"statement\s*(?:ref\.?|reference|number|no\.?)"]},
    },
    "trade_confirmation": {
        "amount": {STRONG: [r"net\s+amount", r"net\s+settlement", r"total\s+settlement", r"settlement\s+amount",
                            r"amount\s+payable"],
                   NEGATIVE: [r"gross\s+amount", r"consideration"]},
        "date": {STRONG: [r"trade\s+date", r"execution\s+date"], NEGATIVE: [r"settlement\s+date"]},
        "reference": {STRONG: [r"order\s*id", r"confirmation\s*(?:no\.?|number|ref\.?)", r"contract\s*(?:no\.?|ref\.?)",
                               r"trade\s*(?:id|ref\.?|no\.?)"]},
    },
    "kyc_notice": {
        "amount": {STRONG: [r"flagged\s+transaction", r"transaction\s+under\s+review", r"amount\s+under\s+review"]},
        "date": {STRONG: [r"notice\s+date", r"date\s+of\s+notice"], NEGATIVE: [r"transaction\s+date", r"value\s+date"]},
        "reference": {STRONG: [r"case\s*(?:id|ref\.?|reference|no\.?|number)"]},
    },
    "research_note": {
        "amount": {STRONG: [r"price\s+target", r"(?:12m\s+)?target(?:\s+price)?"],
                   NEGATIVE: [r"share\s+price", r"current\s+price", r"last\s+price"]},
        "date": {STRONG: [r"report\s+date", r"published", r"date\s+of\s+report"]},
        "reference": {STRONG: [r"note\s*(?:ref\.?|id|no\.?)", r"report\s*(?:id|ref\.?|no\.?)"]},
    },
}


@dataclass(frozen=True)
class LabelHit:
    """One label occurrence in a line: which field it names, its tier and its character span."""

    field: str
    tier: str
    start: int
    end: int
    text: str = ""


_BOUNDARY_BEFORE, _BOUNDARY_AFTER = r"(?<![^\W\d_])", r"(?![^\W\d_])"


@lru_cache(maxsize=16)
def _labels(doc_type: str | None = None) -> tuple[re.Pattern[str], tuple[tuple[str, str, re.Pattern[str]], ...]]:
    """One pattern that finds where any label may start, and each label on its own (field, tier, pattern), the
    document type's own labels first. Whole words only: a label neither starts nor ends inside a word ("tax" is
    not in "taxi"); digits may touch it, since PDF text extraction glues values to labels ("993548900Factuurnummer:")."""
    parts: list[tuple[str, str, str]] = []
    for source in (TYPE_LABELS.get(doc_type or "", {}), FIELD_LABELS):
        for field, tiers in source.items():
            for tier in (STRONG, NEGATIVE, WEAK):  # between equals, the specific beats the generic ("total gst")
                parts.extend((field, tier, fragment) for fragment in tiers.get(tier, ()))
    anyone = re.compile(_BOUNDARY_BEFORE + "(?:" + "|".join(f for _, _, f in parts) + ")" + _BOUNDARY_AFTER,
                        re.IGNORECASE)
    each = tuple((field, tier, re.compile(f"(?:{fragment}){_BOUNDARY_AFTER}", re.IGNORECASE))
                 for field, tier, fragment in parts)
    return anyone, each


# Cached: each field's candidate generators ask for the labels of the same lines again (a document's lines are
# scanned a few hundred times while its choices are built), and the scan is a pure function of the line.
@lru_cache(maxsize=8192)
def _all_labels(line: str, doc_type: str | None = None) -> tuple[LabelHit, ...]:
    """Every label in the line, left to right; where several start at one place the longest wins ("due date",
    not "due"; between equals, the document type's own), and the scan goes on after it."""
    anyone, each = _labels(doc_type)
    hits: list[LabelHit] = []
    pos = 0
    while (m := anyone.search(line, pos)) is not None:
        start = m.start()
        best = None
        for field, tier, rx in each:
            got = rx.match(line, start)
            if got and got.end() > start and (best is None or got.end() > best.end):
                best = LabelHit(field, tier, start, got.end(), " ".join(got.group(0).split()))
        if best is None:  # cannot happen (the combined pattern matched here), but never loop forever
            pos = start + 1
            continue
        hits.append(best)
        pos = best.end
    return tuple(hits)


def label_hits(line: str, field: str, doc_type: str | None = None) -> list[LabelHit]:
    """The labels of `field` in `line`, in order. One pass over all fields' labels, so a longer label of another
    field (say the date label "invoice date") hides a shorter one of this field ("invoice") inside it."""
    return [h for h in _all_labels(line, doc_type) if h.field == field]


def any_label_spans(line: str, doc_type: str | None = None) -> list[tuple[int, int]]:
    """Character spans of every label of any field in `line`."""
    return [(h.start, h.end) for h in _all_labels(line, doc_type)]
