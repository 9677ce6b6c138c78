"""Who issued the document: candidates from where issuers print their name, never label words, page counters,
addresses or the customer's block.

Where the name is, in order of evidence:
1. the sender of a one-line return address above a window envelope's recipient ("QualityHosting AG - Uferweg
   40-42 - D-63571 Gelnhausen"), or a legal-entity name (a name with a legal form: GmbH, B.V., SARL, Sdn Bhd,
   Ltd, Inc, S.p.A., ...) after a seller label ("From", "Sold by", "Verkäufer") or in the letterhead (the first
   lines of the first page, up to the first address line);
2. the name-like lines of the letterhead;
3. a legal-entity name anywhere else outside the recipient's block.
Lines of the recipient's block (after "Bill to", "Invoice for", "Customer", "Rechnungsempfänger", ...) are never
candidates. A line that is a label, a document title ("INVOICE", "Tax Invoice"), a page counter, a date, an
amount, a phone number, an e-mail or web address, or an address (a postcode, a street word and a number) is not
a name. Candidates are verbatim spans of the text (a line, or its part before a separator or after a label), so
the decoding schema can list them and the model chooses.
"""

from __future__ import annotations

import re

from pipeline.grounding._common import STREET, Choice, unique
from pipeline.grounding.domains import names_spelling_domains
from pipeline.grounding.labels import any_label_spans
from pipeline.grounding.locale import is_place_name

HEAD_LINES = 8  # the letterhead lies within the first lines of the first page
MAX_WORDS, MAX_CHARS = 9, 80
MAX_CANDIDATES = 6

LEGAL_FORMS = (
    r"gmbh(?:\s*&\s*co\.?\s*kg)?", r"ag", r"ohg", r"e\.\s?k\.", r"ug", r"mbh", r"b\.\s?v\.?", r"n\.\s?v\.?",
    r"bvba", r"sarl", r"s\.a\.r\.l\.", r"sas", r"s\.a\.s\.", r"s\.a\.", r"eurl", r"sasu", r"sprl", r"srl",
    r"s\.r\.l\.", r"s\.p\.a\.", r"s\.l\.", r"s\.l\.u\.", r"ltd\.?", r"limited", r"llc", r"l\.l\.c\.", r"llp",
    r"inc\.?", r"incorporated", r"corp\.?", r"corporation", r"co\.", r"company", r"plc", r"pvt\.?\s*ltd\.?",
    r"private\s+limited", r"sdn\.?\s*bhd\.?", r"bhd\.?", r"s/b", r"berhad", r"pte\.?\s*ltd\.?", r"pty\.?\s*ltd\.?", r"oy",
    r"oyj", r"ab", r"a/s", r"asa", r"aps", r"sp\.\s*z\s*o\.\s*o\.", r"s\.r\.o\.", r"a\.s\.", r"kft\.?",
    r"zrt\.?", r"d\.o\.o\.", r"enterprise", r"enterprises", r"trading", r"restaurant", r"restoran", r"store", r"mart",
    r"services", r"industries", r"holdings?", r"group",
    r"syarikat", r"perniagaan", r"kedai",  # Malay: company, business, shop (they open the name)
)
# Legal forms as OCR of thermal paper misreads them (D as O or U, O as 0 or D, I and L as 1): a near-miss of the
# field's vocabulary is the form itself. Only multi-letter forms of two words, where a near-miss is no other word.
_OCR_FORMS = ("Sdn Bhd", "Pvt Ltd", "Pte Ltd", "Pty Ltd")
_OCR_CLASSES = {"d": "[dDoOuU0]", "o": "[oO0dD]", "i": "[iIlL1|]", "l": "[lLiI1|]", "b": "[bB8]", "s": "[sS5]",
                "t": "[tT]"}
_OCR_FORM_RE = [(form, re.compile(r"(?<![^\W_])" + r"\.?\s*".join(
    "".join(_OCR_CLASSES.get(ch, re.escape(ch)) for ch in word.lower()) for word in form.split())
    + r"\.?(?![^\W_])", re.I)) for form in _OCR_FORMS]


def _canonical_forms(line: str) -> str:
    """The line with OCR near-misses of two-word legal forms written as the form ("SON BHD" -> "SDN BHD")."""
    for form, rx in _OCR_FORM_RE:
        def canon(m: re.Match[str], form: str = form) -> str:
            seen = m.group(0)
            glued = re.fullmatch(r"(?i)" + "".join(form.split()), seen)  # "SDNBHD": OCR dropped the space
            if re.fullmatch(r"(?i)" + r"\.?\s*".join(form.split()) + r"\.?", seen) and not glued:
                return seen  # already the form, however punctuated
            return form.upper() if seen.upper() == seen else form
        line = rx.sub(canon, line)
    return line


_LEGAL = re.compile(r"(?<![^\W_])(?:" + "|".join(sorted(LEGAL_FORMS, key=len, reverse=True)) + r")(?![^\W_])", re.I)
_SELLER_WORDS = (r"from|seller|vendor|supplier|service\s+provider|sold\s+by|issued\s+by|biller|merchant|"
                 r"verk[\u00e4a]ufer|lieferant|rechnungs?(?:er)?steller|aussteller|fournisseur|vendeur|[\u00e9e]metteur|"
                 r"leverancier|verkoper|proveedor|emisor|vendedor|fornitore|cedente|remit(?:\s+payment)?\s+to|"
                 r"(?:make\s+(?:cheques?|checks?)\s+)?payable\s+to|beneficiary|beg[\u00fcu]nstigter|"
                 r"b[\u00e9e]n[\u00e9e]ficiaire")
_SELLER_LABEL = re.compile(rf"(?i)^.*?\b(?:{_SELLER_WORDS})\b\s*[:\-]?\s*")
# the label heading its line, with a colon or alone ("Remit payment to", "Lieferant:"), not a sentence's word
_SELLER_HEADING = re.compile(rf"(?i)^\W*(?:{_SELLER_WORDS})\b\s*(?:[:\-]\s*|$)")
_BUYER_LABEL = re.compile(r"(?i)\b(?:bill(?:ed)?\s+to|invoice\s+(?:for|to)|sold\s+to|ship(?:ped)?\s+to|deliver(?:ed)?\s+to|"
                          r"customer(?!\s+(?:service|care|support))|(?<!service\s)client|buyer|consignee|"
                          r"recipient|attn|party|kunde|rechnungsempf[\u00e4a]nger|"
                          r"lieferanschrift|destinataire|factur[\u00e9e]\s+[\u00e0a]|klant|cliente|destinatario|"
                          r"titulaire|to\s*:)")
_TITLE_WORDS = re.compile(
    r"(?i)^(?:(?:tax|commercial|proforma|pro-forma|original|duplicate|simplified|final)\s+)*"
    r"(?:invoice|receipt|credit\s+note|bill|statement|rechnung|gutschrift|facture|factuur|factura|fattura|invois|"
    r"quittung|kassenbon|re[\u00e7c]u|recibo|payslip|cash\s+(?:bill|sales?)|official\s+receipt|quotation|"
    r"delivery\s+note|order)(?:\s+(?:original|copy|duplicate|triplicate))?(?:\s+(?:no\.?|number|#).*)?[\s.:]*$")
_TRAILING_TITLE = re.compile(r"(?i)\s+(?:tax\s+)?(?:invoice|receipt|rechnung|facture|factuur|factura)\s*$")
_NOT_NAME = re.compile(
    r"(?i)(?:page\s*\d|seite\s*\d|\d+\s*(?:/|of|von|de)\s*\d+\s*$|@|www\.|https?:|\.com\b|tel\b|phone|fax|"
    r"^\W*(?:date|datum|total|subtotal|amount|qty|quantity|description|item|unit|price|vat|gst|tax|no\.?|"
    r"invoice\s+no|payment|summary|details|guest|name|page|seite|bank|iban|account|kunden?|customer)\b|"
    r"^\W*(?:contact(?:\s+us)?|nous\s+contacter|contactez[\s-]nous|kontakt|contacteer\s+ons|cont[a\u00e1]ctenos|"
    r"contattaci)\W*$|"  # a contact heading
    + STREET + ")")
# The holder of the account the payment details ask to pay into is the payee: "Titulaire du compte : NETCO",
# "Account holder: Acme". Not where the account is the one a direct debit draws on (the customer's).
_PAYEE_LABEL = re.compile(r"(?i)\b(?:account\s+(?:holder|name)|a/c\s+name|name\s+of\s+account|kontoinhaber(?:in)?|"
                          r"titulaire\s+du\s+compte|rekeninghouder|ten\s+name\s+van|titular\s+de\s+la\s+cuenta|"
                          r"intestatario(?:\s+del\s+conto)?|nama\s+akaun)\s*:\s*")
_DIRECT_DEBIT = re.compile(r"(?i)pr[\u00e9e]lev|lastschrift|direct\s+debit|domicilia|incasso|abbuch|einzug|mandat|"
                           r"addebit|d[\u00e9e]bito\s+(?:directo|autom)|debit\s+(?:order|authori)")
DEBIT_CONTEXT_LINES = 3  # a direct debit's wording stands on the holder's line or just above it
_POSTCODE = re.compile(r"\b(?:\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}|\d{4}\s?[A-Z]{2})\b")
# Contact details a letterhead sets on the name's line ("Die Vordefinierte Firma Tel: +49 30 41092-0"): where text
# extraction merges the letterhead's columns, the name is the part before them.
_CONTACT = re.compile(r"(?i)\s+(?:tel(?:ephone|efon)?|t[\u00e9e]l|phone|fax|e-?mail|mobile|www\.|web(?:site)?)\b")
_SEPARATORS = re.compile(r"\s+[-\u2013\u2014|\u00b7\u2022]\s+|[|;\[\]]|[:,](?=\s|$)|\s{2,}|\t")


def _mostly_labels(s: str) -> bool:
    """A span that is mostly labels of amounts, dates or numbers ("Unit Price", "Invoice Date") names nobody."""
    covered = sum(sum(ch.isalpha() for ch in s[a:b]) for a, b in any_label_spans(s))
    return covered >= 0.6 * max(1, sum(ch.isalpha() for ch in s))


def _name_like(s: str) -> bool:
    if is_place_name(s):  # "Buckinghamshire", "Kuala Lumpur": an address line, not who issued the document
        return False
    if s.startswith("(") and s.endswith(")"):  # "(Not to be used for payment remittance)": a note
        return False
    letters = sum(ch.isalpha() for ch in s)
    digits = sum(ch.isdigit() for ch in s)
    words = s.split()
    if "%" in s:  # "Disc.%", "VAT 20%": a rate's column or line, never a name
        return False
    return (letters >= 2 and digits <= max(2, letters // 4) and 1 <= len(words) <= MAX_WORDS
            and len(s) <= MAX_CHARS and not _NOT_NAME.search(s) and not _POSTCODE.search(s)
            and not _TITLE_WORDS.match(s) and not _mostly_labels(s))


def _spans(line: str) -> list[str]:
    """The line, without a seller label or a trailing document title, and its part up to a legal form or the
    first separator: each a verbatim part of the line."""
    out = []
    stripped = _SELLER_LABEL.sub("", line, count=1).strip()
    if stripped and _FORM_LINE.match(stripped):
        stripped = line.strip()  # "Lieferant GmbH": the seller word followed by a legal form is a company's name
    stripped = _TRAILING_TITLE.sub("", stripped).strip(" ,;:-")
    if stripped:
        out.append(stripped)
    legal = list(_LEGAL.finditer(stripped))
    if legal:  # up to the last legal form: "Sinnathamby Holdings Sdn. Bhd." keeps its "Sdn. Bhd."
        out.append(stripped[:legal[-1].end()].strip(" ,;:-"))
    first = _SEPARATORS.split(stripped, maxsplit=1)[0].strip(" ,;:-")
    if first:
        out.append(first)
    if (before := _before_contact(stripped)) != stripped:
        out.append(before)
    return [s for s in unique(out) if _name_like(s) and _has_name(s)]


def _before_contact(line: str) -> str:
    return _CONTACT.split(line, maxsplit=1)[0].strip(" ,;:-")


def _has_name(s: str) -> bool:
    """More than legal forms and punctuation: "Company" or "SDN BHD" alone names nobody."""
    rest = _LEGAL.sub(" ", s)
    return bool(re.search(r"[^\W\d_]{2}", re.sub(r"\(\s*\w\s*\)", " ", rest)))


def buyer_lines(lines: list[str], payees: dict[int, int]) -> set[int]:
    """Lines of recipient blocks: the label's line (its text after the label) and up to three lines below it."""
    out: set[int] = set()
    for i, line in enumerate(lines):
        # "Payable to:" and the holder of the account to pay into name the seller
        if _BUYER_LABEL.search(line) and not _SELLER_LABEL.match(line) and i not in payees:
            out.add(i)
            for j in range(i + 1, min(len(lines), i + 4)):
                if _SELLER_LABEL.match(lines[j]):  # the seller's block begins: the recipient's has ended
                    break
                out.add(j)
    return out


_FORMERLY = re.compile(r"(?i)\b(?:formerly|previously)(?:\s+(?:known\s+as|trading\s+as|called))?\b|\bvormals\b|"
                       r"\banciennement\b|\bvoorheen\b|\bex-")


def _former_name_lines(lines: list[str]) -> set[int]:
    """Lines naming who the issuer used to be ("formerly known as" and the name on its line or the next)."""
    out: set[int] = set()
    for i, line in enumerate(lines):
        if m := _FORMERLY.search(line):
            out.add(i)
            if not line[m.end():].strip(" :,()") and i + 1 < len(lines):
                out.add(i + 1)
    return out


_RETURN_ADDRESS = re.compile(r"\s+[-\u2013\u00b7\u2022|]\s+")


def _return_address_sender(line: str) -> str | None:
    """The sender of a one-line return address printed above a window envelope's recipient ("QualityHosting AG -
    Uferweg 40-42 - D-63571 Gelnhausen", DIN 5008 and its equivalents): name, street, postcode and town."""
    parts = _RETURN_ADDRESS.split(line)
    if len(parts) >= 3 and _POSTCODE.search(" ".join(parts[1:])) and _name_like(parts[0]) and _has_name(parts[0]):
        return parts[0].strip()
    return None


def _payee_lines(lines: list[str]) -> dict[int, int]:
    """Lines with an account-holder label (line -> where the label ends), unless a direct debit draws on that
    account."""
    out = {}
    for i, line in enumerate(lines):
        m = _PAYEE_LABEL.search(line)
        if m and not _DIRECT_DEBIT.search(" ".join(lines[max(0, i - DEBIT_CONTEXT_LINES):i + 1])):
            out[i] = m.end()
    return out


def _has_letters(line: str) -> bool:
    """An address line names its town beside the postcode; a line of figures alone ("3 18.01017", a till's
    number over a scanned receipt's header) is no address."""
    return sum(ch.isalpha() for ch in line) >= 2


def _starts_upper(name: str) -> bool:
    """The name's first letter is a capital: "99 SPEED MART S/B" and "7-Eleven, Inc." are names, "and sons ltd"
    in a sentence is not."""
    first = next((ch for ch in name if ch.isalpha()), "")
    return first.isupper()


def _letterhead(lines: list[str], buyer: set[int]) -> list[int]:
    """The sender block: the first lines of the first page up to the first address line (a street or a postcode),
    before any recipient label; a line is read up to the contact details set beside it."""
    out = []
    for i in range(min(len(lines), HEAD_LINES)):
        if not lines[i]:
            continue
        own = _before_contact(lines[i])  # a phone number's five digits are no postcode
        if i in buyer or (_POSTCODE.search(own) and _has_letters(own)):
            break
        if not _NOT_NAME.search(own) or _LEGAL.search(lines[i]):
            out.append(i)
    return out


_CONTINUES = re.compile(r"(?:&|\band|-)$|\([^)]*$")  # "HARDWARE &", "ENTERPRISE (SETIA": the name goes on
_FORM_LINE = re.compile(rf"^(?:{'|'.join(LEGAL_FORMS)}|\(\w\)|[\s.,])+$", re.I)  # "CO. (M) SDN BHD"
_INITIALISM = re.compile(r"(?<![^\W_])(?:[^\W_]\.){2,}")  # "D.1.Y."
_DIGIT_AS_LETTER = str.maketrans("1058", "IOSB")


def _read_name_lines(lines: list[str]) -> list[str]:
    """The letterhead as names are set: a name continued on the next line (after "&", an open parenthesis, or
    followed by a line holding only its legal form) joined into one line, and the digits OCR reads into an
    initialism's letters ("D.1.Y.") read as the letters. A joined line's successor is left empty."""
    out = list(lines)
    for i in range(min(len(out), HEAD_LINES) - 1):
        nxt = out[i + 1]
        if out[i] and nxt and (_CONTINUES.search(out[i]) or (_FORM_LINE.match(nxt) and _LEGAL.search(nxt))):
            out[i], out[i + 1] = f"{out[i]} {nxt}", ""
    def letters(m: re.Match[str]) -> str:  # an initialism has letters; "1.1." of a date stays as printed
        return m[0].translate(_DIGIT_AS_LETTER) if re.search(r"[^\W\d_]", m[0]) else m[0]

    return [_INITIALISM.sub(letters, line) for line in out]


# Documents that ask to be paid into the issuer's account: there the account holder of the bank details is the
# payee. On a statement, a notice or a refund the account named is the customer's.
PAYEE_TYPES = frozenset({"invoice", "utility_bill"})


def issuer_choice(text: str, doc_type: str | None = None) -> Choice:
    first_page = text.split("\n[page 2]\n", 1)[0]
    lines = _read_name_lines([_canonical_forms(" ".join(line.split())) for line in first_page.splitlines()])
    payees = _payee_lines(lines) if doc_type in PAYEE_TYPES else {}
    buyer = buyer_lines(lines, payees)
    head = _letterhead(lines, buyer)
    # the recipient's lines and a former name are never who issued the document
    buyer |= _former_name_lines(lines)
    seller = []
    for i, line in enumerate(lines):
        if _SELLER_LABEL.match(line):  # the name after the label, or on one of the two lines below it
            seller += [i] if _spans(line) else [i + 1, i + 2]
    returned = [name for line in lines[:HEAD_LINES * 2] if (name := _return_address_sender(line))]
    headed = [j for i, line in enumerate(lines) if _SELLER_HEADING.match(line)
              for j in ([i] if _spans(line) else [i + 1, i + 2])]

    def legal_in(indices: list[int]) -> list[str]:
        found = []
        for i in indices:
            if 0 <= i < len(lines) and i not in buyer:
                found.extend(s for s in _spans(lines[i]) if _LEGAL.search(s) and _starts_upper(s))
        return found

    def named_in(indices: list[int]) -> list[str]:  # a seller heading names the issuer, legal form or not
        return [s for i in indices if 0 <= i < len(lines) and i not in buyer for s in _spans(lines[i])[:1]]

    everywhere = [i for i in range(len(lines)) if i not in buyer]
    named = [s for i, end in payees.items() if i not in buyer for s in _spans(lines[i][end:])[:1]]
    legal_anywhere = legal_in(everywhere)
    tiers = [
        ("strong", returned + legal_in(sorted(set(seller))) + named_in(headed) + legal_in(head)),
        # the payee of the bank details, or a legal name the page prints (the one it repeats most first), over a
        # letterhead line with no legal form
        ("weak", (named + legal_anywhere) if named else []),
        ("weak", _with_domain_names([s for i in head[:3] for s in _spans(lines[i])[:1]], lines, buyer)),
        ("unlabelled", legal_anywhere),
    ]
    for tier, values in tiers:
        values = _ranked(unique(values), text)[:MAX_CANDIDATES]
        if values:
            groups = _name_groups({v.casefold() for v in values})
            return Choice(tuple(values), tier, nullable=tier != "strong",
                          decided=tier == "strong" and len(groups) == 1)
    return Choice((), "none", nullable=True)


def _with_domain_names(names: list[str], lines: list[str], buyer: set[int]) -> list[str]:
    """The letterhead's names and the names the page prints that spell its own web or e-mail domain ("EDF" for
    edf.fr), unless a letterhead name already holds them ("DOMINO'S PIZZA" holds "DOMINO'S")."""
    held = [n.casefold() for n in names]
    spelled = [d for d in names_spelling_domains(lines, buyer)
               if _name_like(d) and not any(d.casefold() in h for h in held)]
    return names + spelled


DOMINANT = 2  # a name printed this many times as often as any other candidate is the issuer


def _core(name: str) -> str:
    """The name without its legal form and punctuation, casefolded: what the letterhead, the footer, the payment
    details and the e-mail domain all repeat."""
    return " ".join(re.findall(r"[^\W_]+", _LEGAL.sub(" ", name).casefold()))


def _ranked(values: list[str], text: str) -> list[str]:
    """Candidates by how often the document prints their name (issuers repeat theirs: letterhead, footer, bank
    details, web and e-mail domain; the recipient is named once or twice). A name printed at least DOMINANT times
    as often as every other candidate is the only one left."""
    if len(values) < 2:
        return values
    squashed = "".join(re.findall(r"[^\W_]+", text.casefold()))  # "www.qualityhosting.de" holds "qualityhosting"

    def count(name: str) -> int:
        core = _core(name).replace(" ", "")
        return squashed.count(core) if len(core) >= 3 else 0

    counts = {v: count(v) for v in values}
    ranked = sorted(values, key=lambda v: -counts[v])
    top, second = counts[ranked[0]], counts[ranked[1]]
    return ranked[:1] if top >= 2 and top >= DOMINANT * max(second, 1) else ranked


def _name_groups(names: set[str]) -> list[set[str]]:
    """Names grouped when one contains the other ("Contoso" and "Contoso, Ltd." name the same company)."""
    groups: list[set[str]] = []
    for name in sorted(names, key=len):
        for group in groups:
            if any(other in name for other in group):
                group.add(name)
                break
        else:
            groups.append({name})
    return groups
