"""Names the document's own web and e-mail domains spell: "edf.fr" and "EDF SERVICE CLIENTS", "info@nexgen.co.uk"
and "NEXGEN". An issuer prints its domain in its contact details and footer; where its name is printed as words
that spell the domain, that printed name is an issuer candidate.

The registrable part of a host ("particulier.edf.fr" -> "edf", "shop.example.com.my" -> "example") comes from the
Public Suffix List (tldextract, with its bundled copy: no network access). Mail providers and social networks
say nothing about the sender and are skipped.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_HOST = re.compile(r"(?i)(?:(?<=@)|(?<![\w@.-])(?:https?://)?(?:www\.)?)"
                   r"((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,})(?![\w-])")
# where a domain names the provider of a mailbox or a page, or the software that produced the document
SHARED = frozenset({
    "gmail", "googlemail", "hotmail", "outlook", "live", "msn", "yahoo", "aol", "icloud", "me", "gmx", "web",
    "mail", "protonmail", "proton", "zoho", "yandex", "qq", "163", "126", "rediffmail", "orange", "wanadoo",
    "laposte", "t-online", "libero", "facebook", "instagram", "twitter", "x", "linkedin", "youtube", "tiktok",
    "google", "apple", "microsoft", "example", "localhost", "tcpdf",
})
_MAILBOX = re.compile(r"[\w.+-]+@")  # an e-mail address's local part
_CREDIT = re.compile(r"(?i)\b(?:powered|generated|created|made|produced)\s+(?:by|with|using)\b")
MIN_LETTERS = 3  # "me.com" or a two-letter host spells too many words by chance


@lru_cache(maxsize=1)
def _extract() -> Any:
    # an import here: tldextract reads its bundled Public Suffix List on first use, only for documents with a host
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _squash(s: str) -> str:
    return "".join(re.findall(r"[^\W_]+", s.casefold()))


def document_domains(lines: list[str]) -> list[str]:
    """The registrable names of the hosts the lines print, first seen first ("edf", "nexgen", "azure-interior")."""
    out: dict[str, None] = {}
    for line in lines:
        for m in _HOST.finditer(line):
            name = _extract()(m.group(1)).domain.casefold()
            if name and name not in SHARED and len(_squash(name)) >= MIN_LETTERS:
                out.setdefault(name, None)
    return list(out)


def _blank(m: re.Match[str]) -> str:
    return " " * len(m.group(0))  # same length: the line's positions hold


def names_spelling_domains(lines: list[str], skip: set[int]) -> list[str]:
    """Printed word runs (outside the hosts themselves, the `skip` lines and software credits) whose letters spell
    one of the document's domains: "EDF" for edf.fr, "Azure Interior" for azure-interior.com."""
    wanted = {_squash(d): d for d in document_domains(lines)}
    if not wanted:
        return []
    found: list[str] = []
    for i, line in enumerate(lines):
        if i in skip or _CREDIT.search(line):
            continue
        bare = _HOST.sub(_blank, _MAILBOX.sub(_blank, line))  # the hosts themselves spell nothing
        words = list(re.finditer(r"[^\W_][\w'&.-]*", bare))
        for a in range(len(words)):
            spelled = ""
            for b in range(a, len(words)):
                spelled += _squash(words[b].group(0))
                if spelled in wanted:
                    found.append(line[words[a].start():words[b].end()].strip(" .,-"))
                    break
                if not any(w.startswith(spelled) for w in wanted):
                    break
    return list(dict.fromkeys(found))
