"""Accounts a document prints: IBANs (checksum-valid, compact) and other account numbers verbatim.

IBANs are printed grouped in fours, in national groupings ("FR76 10107 00245 00617052317 39"), wrapped onto the
next line, or glued to the next label by PDF text extraction ("NL50INGB0683251309IBAN"). The scanner collects the
letters and digits of such a run and keeps the prefixes that are valid IBANs (the country's length from `schwifty`'s
registry and the mod-97 check digits), so glued words and wrapped neighbours fall away by arithmetic, not by guesswork. National BBAN rules
(bank-code registries, national check keys) are not applied: an IBAN with valid check digits of a bank unknown to
schwifty's registry is still one the document prints.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pipeline.grounding._common import in_order, unique

# A country code and check digits, then groups of letters/digits separated by single spaces or one line break.
_IBAN_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:(?: |\n)?[A-Za-z0-9]{1,8}){1,9}")
_IBAN_SHAPED = re.compile(r"[A-Z]{2}\d{2}[A-Z0-9]{11,}$")
_ACCOUNT_TOKEN = re.compile(r"(?<![\w/-])[A-Z0-9][A-Z0-9-]{3,33}(?![\w/-])")


@lru_cache(maxsize=8192)
def valid_iban(candidate: str) -> bool:
    """The country's IBAN length (schwifty's registry) and the ISO 7064 mod-97 check digits. The national BBAN
    layout is not required: schwifty rejects, say, a GB IBAN whose bank code is not four letters, but an IBAN with
    the right length and check digits is one the document prints, and the check digits alone already catch a
    glued word or a wrapped neighbour."""
    # lazy: IBAN registry loads on first use
    from schwifty import IBAN
    from schwifty.exceptions import SchwiftyException

    try:
        spec = IBAN(candidate, allow_invalid=True).spec
    except (SchwiftyException, ValueError, KeyError):
        return False
    if spec is None or getattr(spec, "iban_length", None) != len(candidate) or not candidate.isalnum():
        return False
    rearranged = candidate[4:] + candidate[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _ibans_in(run: str) -> list[str]:
    """The longest prefix of a run (spaces and line breaks removed, up to a lower-case letter) that is a valid
    IBAN, if any."""
    compact = re.match(r"[A-Z0-9]*", re.sub(r"\s", "", run)).group(0)  # type: ignore[union-attr]
    for n in range(min(len(compact), 34), 14, -1):
        if valid_iban(compact[:n]):
            return [compact[:n]]
    return []


def iban_candidates(text: str) -> list[str]:
    found = []
    for m in _IBAN_RUN.finditer(text):
        found.extend((m.start(), iban) for iban in _ibans_in(m.group(0)))
    return in_order(found)


def account_candidates(text: str) -> list[str]:
    """Checksum-valid IBANs without spaces, then every other account-like token (five digits or more) printed
    verbatim; a token shaped like an IBAN that fails the checksum is a misprint or a glued word, never an account."""
    tokens = [t for t in _ACCOUNT_TOKEN.findall(text) if sum(c.isdigit() for c in t) >= 5
              and not (_IBAN_SHAPED.match(t) and not valid_iban(t))]
    return unique(iban_candidates(text) + tokens)
