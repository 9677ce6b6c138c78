"""Turn a delimited text export into a `RawTable`: encoding, delimiter, preamble and header detection.

Encoding: BOMs first (utf-8-sig, utf-16), then strict UTF-8, then the single-byte code pages
cp1252/cp1250/cp1251 ranked by how well the header matches known column names (latin-1 last; it
decodes anything). Delimiter and header row: for each candidate delimiter every early line is tried
as the header; the best synonym match with a consistent field count below it wins. Without a
recognisable header the file is read headerless and roles are inferred from cell contents.
Written here rather than taken from clevercsv + charset-normalizer because the header match has to drive both
choices (which code page, which delimiter, which line); on the eight delimited real exports of the shared set it
picks the same encoding and delimiter as those two libraries.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pipeline.ingest.columns import ColumnMatch, match_columns, normalise_header
from pipeline.ingest.infer_columns import complete_roles, infer_roles, looks_like_header
from pipeline.ingest.text_lines import physical_lines
from pipeline.ingest.values import COMMON_CURRENCIES, bic_currency, normalise_currency

DELIMITERS = (",", ";", "\t", "|")
_HEADER_SCAN_LINES = 40
_IBAN = re.compile(r"\b([A-Z]{2}[0-9]{2}(?:\s?[A-Z0-9]{4}){2,7}(?:\s?[A-Z0-9]{1,4})?)\b")
_ISO_TOKEN = re.compile(r"(?<![A-Za-z])([A-Z]{3})(?![A-Za-z])")


class NotATable(ValueError):
    """The file is not a delimited transaction table we can understand (message says why)."""


class ProfileMismatch(NotATable):
    """A bank profile chosen by the file's name names a column its header lacks: for a shipped profile another
    layout of that bank's exports (or another bank's file with a like name), read by detection instead."""


@dataclass
class RawTable:
    """Header plus rows of cells, each row with its 1-based line/record number in the file."""

    header: list[str]
    rows: list[tuple[int, list[Any]]]
    match: ColumnMatch
    encoding: str = "utf-8"
    delimiter: str | None = None
    headerless: bool = False
    preamble: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    bad_records: list[tuple[int, str]] = field(default_factory=list)  # (line, reason): each one row error
    profile: Any = None  # the BankProfile it was read with, whose date format, decimal mark and currency apply

    def preamble_hints(self) -> tuple[str | None, str | None]:
        """(account, currency) mentioned in preamble lines: an IBAN; 'EUR'; else the country of a labelled BIC."""

        account = currency = None
        for line in self.preamble:
            if account is None:
                m = _IBAN.search(line.upper())
                if m:
                    account = m.group(1).replace(" ", "")
            if currency is None:
                for tok in _ISO_TOKEN.findall(line):
                    iso = normalise_currency(tok)
                    if iso and _is_known_currency(iso):
                        currency = iso
                        break
        if currency is None and account is None:  # the bank's BIC tells its country where nothing else does
            currency = bic_currency("\n".join(self.preamble))
        return account, currency


def _is_known_currency(code: str) -> bool:
    return code in COMMON_CURRENCIES


_SINGLE_BYTE = ("cp1252", "cp1250", "cp1251")  # tried in this order; the header's match decides among them
_SNIFF_BYTES = 64 * 1024
_MAX_MESS = 0.2  # charset-normalizer's mess ratio above which a decoding is taken for a mis-decode


def utf16_without_bom(data: bytes) -> str | None:
    """'utf-16-le' or 'utf-16-be' for UTF-16 text without a byte-order mark (its ASCII characters leave a NUL
    in every other byte), else None."""
    head = data[:4096]
    if len(head) < 8 or len(head) % 2:
        head = head[: len(head) - len(head) % 2]
    if len(head) < 8:
        return None
    odd, even = head[1::2].count(0), head[0::2].count(0)
    half = len(head) // 2
    for enc, nuls, other in (("utf-16-le", odd, even), ("utf-16-be", even, odd)):
        if nuls >= 0.3 * half and other <= 0.05 * half:
            try:
                data.decode(enc)
            except UnicodeDecodeError:
                return None
            return enc
    return None


def _mess(sample: bytes, encoding: str) -> float | None:
    """charset-normalizer's mess ratio of `sample` read as `encoding` (0: clean text), None when it rejects it."""
    # lazy: only files that are not UTF-8 need it
    from charset_normalizer import from_bytes

    best = from_bytes(sample, cp_isolation=[encoding]).best()
    return None if best is None else best.chaos


_LETTER_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Nd"})


def misread_letters(text: str) -> int:
    """How many non-ASCII signs sit inside words: a Central European letter read in the wrong code page turns
    into one ('Wpłata' as 'Wp³ata', 'Żabka' as '¯abka' in cp1252), which charset-normalizer's mess ratio alone
    does not tell on a short export."""
    count = 0
    for i, ch in enumerate(text):
        if ord(ch) > 127 and unicodedata.category(ch) not in _LETTER_CATEGORIES:
            before = text[i - 1] if i else " "
            after = text[i + 1] if i + 1 < len(text) else " "
            count += before.isalpha() or after.isalpha()
    return count


def decode_candidates(data: bytes) -> list[tuple[str, str]]:
    """Possible (encoding, text) decodings, most trustworthy first: a byte-order mark, UTF-16 without one, strict
    UTF-8; else the Windows code pages and charset-normalizer's own guess (Greek cp1253, Shift-JIS, ...) that read
    as text rather than mojibake (the caller's header match ranks them), latin-1 last."""
    if data.startswith(b"\xef\xbb\xbf"):
        return [("utf-8-sig", data.decode("utf-8-sig", errors="replace"))]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return [("utf-16", data.decode("utf-16", errors="replace"))]
    if (wide := utf16_without_bom(data)) is not None:
        return [(wide, data.decode(wide))]
    try:
        return [("utf-8", data.decode("utf-8"))]
    except UnicodeDecodeError:
        pass
    # lazy: only files that are not UTF-8 need it
    from charset_normalizer import from_bytes

    sample = data[:_SNIFF_BYTES]
    guess = from_bytes(sample).best()
    names = list(_SINGLE_BYTE)
    if guess is not None and guess.encoding not in names:
        names.insert(0, guess.encoding)
    readable = []
    for enc in names:
        mess = guess.chaos if guess is not None and enc == guess.encoding else _mess(sample, enc)
        if mess is not None and mess <= _MAX_MESS:
            try:
                text = data.decode(enc)
                readable.append(((mess > 0.05, misread_letters(text[:_SNIFF_BYTES])), enc, text))
            except UnicodeDecodeError:
                continue
    out = [(enc, text) for _, enc, text in sorted(readable, key=lambda t: t[0])]  # stable: clean ones first
    out.append(("latin-1", data.decode("latin-1")))
    return out


def _split_line(line: str, delimiter: str) -> list[str]:
    try:
        return next(csv.reader([line], delimiter=delimiter, skipinitialspace=False), [])
    except csv.Error:  # an oversized or malformed line is no header candidate (its record fails on its own later)
        return []


def _split(lines: list[str], delimiter: str) -> list[list[str]]:
    return [_split_line(ln, delimiter) for ln in lines]


@dataclass
class _Candidate:
    score: tuple[float, ...]
    delimiter: str
    header_index: int | None
    match: ColumnMatch


def best_header(split: list[list[str]]) -> tuple[tuple[float, ...], int, ColumnMatch] | None:
    """(score, index, match) of the row that best reads as a transaction header: the most column synonyms, then
    the most consistent field count in the 20 rows below it, then the earliest. None when no row has a date and
    an amount name."""
    best: tuple[tuple[float, ...], int, ColumnMatch] | None = None
    for i, cells in enumerate(split[:_HEADER_SCAN_LINES]):
        if len(cells) < 2:
            continue
        m = match_columns(cells)
        if m.score < 10:
            continue
        below = [len(c) for c in split[i + 1 : i + 21] if any(str(x).strip() for x in c)]
        n = len(cells)
        consistent = sum(1 for k in below if abs(k - n) <= 1) / len(below) if below else 0.0
        score = (float(m.score), consistent, -float(i))
        if best is None or score > best[0]:
            best = (score, i, m)
    return best


def content_header(split: list[list[Any]]) -> tuple[int, ColumnMatch] | None:
    """(index, match) of the first row that reads as a header of names nobody listed (no number or date in it)
    above rows whose cells hold dates and amounts; the roles come from those cells (`complete_roles`)."""
    for i, cells in enumerate(split[:_HEADER_SCAN_LINES]):
        if not looks_like_header(cells):
            continue
        width = len(cells)
        below = [(i + 2 + k, list(r)) for k, r in enumerate(split[i + 1 : i + 201]) if any(str(x).strip() for x in r)]
        if not below or sum(1 for _, r in below if abs(len(r) - width) <= 1) < 0.8 * len(below):
            continue
        match = complete_roles(match_columns([str(c).strip() for c in cells]), below, width)
        if match.score >= 10 or match.undecided.get("amount"):
            return i, match
    return None


def _best_layout(text: str) -> _Candidate | None:
    lines = physical_lines(text)[: _HEADER_SCAN_LINES + 30]
    best: _Candidate | None = None
    for d in DELIMITERS:
        found = best_header(_split(lines, d))
        if found is not None and (best is None or found[0] > best.score):
            best = _Candidate(found[0], d, found[1], found[2])
    return best


def _headerless_layout(text: str) -> tuple[str, int, int] | None:
    """(delimiter, modal field count, index of first row with that count) for header-less tables."""
    lines = [ln for ln in physical_lines(text)[:200] if ln.strip()]
    best: tuple[float, str, int] | None = None
    for d in DELIMITERS:
        counts = [len(c) for c in _split(lines, d)]
        if not counts:
            continue
        modal = max(set(counts), key=counts.count)
        if modal < 3:
            continue
        share = counts.count(modal) / len(counts)
        if share >= 0.6 and (best is None or (share, modal) > (best[0], best[2])):
            best = (share, d, modal)
    if best is None:
        return None
    return best[1], best[2], 0


def _records(text: str, delimiter: str, start_line: int) -> tuple[list[tuple[int, list[str]]], list[tuple[int, str]]]:
    """(records, bad records) from line `start_line` (0-based), each with its 1-based starting line number.
    A record the csv module rejects (a field over its size limit, a stray quote) becomes a bad record and
    reading resumes at the next line, so one broken record never costs the file's other rows."""
    lines = physical_lines(text, keepends=True)
    pos = start_line

    def feed() -> Iterator[str]:
        nonlocal pos
        while pos < len(lines):
            pos += 1
            yield lines[pos - 1]

    source = feed()
    out: list[tuple[int, list[str]]] = []
    bad: list[tuple[int, str]] = []
    while pos < len(lines):
        reader = csv.reader(source, delimiter=delimiter)
        first = pos
        try:
            for rec in reader:
                line_no, first = first + 1, pos
                if rec and any(c.strip() for c in rec):
                    out.append((line_no, rec))
        except csv.Error as exc:
            bad.append((first + 1, f"malformed CSV record at line {first + 1}: {exc}"))
    return out, bad


def _decode_best(data: bytes) -> tuple[str, str, _Candidate | None]:
    """(encoding, text, best header layout) of the decoding whose header reads best (earlier ones win ties)."""
    scored: list[tuple[tuple[float, ...], str, str, _Candidate | None]] = []
    for rank, (enc, text) in enumerate(decode_candidates(data)):
        cand = _best_layout(text)
        scored.append(((cand.score if cand else (0.0,)) + (-rank,), enc, text, cand))
    _, enc, text, cand = max(scored, key=lambda t: t[0])
    return enc, text, cand


def profile_columns(profile: Any, header: list[str], match: ColumnMatch) -> ColumnMatch:
    """The profile's column roles over the detected ones; a column it names keeps only the role it gives."""

    names = [normalise_header(h) for h in header]
    given: dict[str, list[int]] = {}
    for role, refs in profile.columns.items():
        wanted = refs if isinstance(refs, list) else [refs]
        found = []
        for ref in wanted:
            if isinstance(ref, int):
                if 1 <= ref <= len(header):
                    found.append(ref - 1)
            elif normalise_header(ref) in names:
                found.append(names.index(normalise_header(ref)))
        # a list names alternatives (export layouts differ): one present is enough; a single column must be there
        if not found or (len(wanted) == 1 and len(found) != 1):
            raise ProfileMismatch(f"bank profile {profile.name!r}: no column {' or '.join(map(repr, wanted))} for "
                            f"{role} in the header {header[:12]}")
        given[role] = found
    taken = {i for cols in given.values() for i in cols}
    roles = {r: [i for i in cols if i not in taken] for r, cols in match.roles.items() if r not in given}
    return ColumnMatch(roles={**{r: c for r, c in roles.items() if c}, **given}, header_currency=match.header_currency)


def _parse_with_profile(data: bytes, profile: Any) -> RawTable:
    """A delimited file read as its bank profile says, detecting only what the profile leaves open."""
    if profile.encoding:
        enc, text = profile.encoding, data.decode(profile.encoding, errors="replace")
    else:
        enc, text, _ = _decode_best(data)
    lines = physical_lines(text)
    start = profile.skip_lines
    if start >= len(lines):
        raise NotATable(f"bank profile {profile.name!r}: skips {start} lines of {len(lines)}")
    body_text = "\n".join(lines[start:])
    delimiter = profile.delimiter
    if delimiter is None:
        found = _best_layout(body_text) if profile.header else None
        layout = None if found else _headerless_layout(body_text)
        delimiter = found.delimiter if found else (layout[0] if layout else None)
        if delimiter is None:
            raise NotATable(f"bank profile {profile.name!r}: no delimiter found; set `delimiter`")
    if profile.header:
        header = [h.strip() for h in _split_line(lines[start], delimiter)]
        rows, bad = _records(text, delimiter, start + 1)
        match = match_columns(header)
    else:
        rows, bad = _records(text, delimiter, start)
        width = max((len(r) for _, r in rows), default=0)
        header = [f"column_{i + 1}" for i in range(width)]

        match = infer_roles(rows, width)
    return RawTable(header=header, rows=rows, match=profile_columns(profile, header, match), encoding=enc,
                    delimiter=delimiter, headerless=not profile.header, preamble=lines[:start], bad_records=bad,
                    notes=[f"bank profile {profile.name!r}"], profile=profile)


_QUANTITY_WORDS = frozenset({"quantity", "qty", "shares", "units"})
# what a position is worth now: a holdings report's columns, never a trade's or an order's ('Price', 'Value in GBP')
_VALUATION = re.compile(r"\b(market value|cost basis|closing (price|value)|gain loss|unrealized)\b")
_BALANCE = re.compile(r"\b(balance|solde)\b|saldo\b")  # 'Boeksaldo' too


def not_transactions(data: bytes) -> str | None:
    """What a file no transaction layout fits holds instead, where its header tells, or None: 'a holdings table'
    (a quantity column beside a position's valuation: positions, tax lots, fund shares) or 'a balances table'
    (balance columns and nothing but dates, accounts and currencies beside them). A file without amounts is not
    named so: whole-number amounts (yen, forint) look like any other number."""
    _, text, _ = _decode_best(data[:_SNIFF_BYTES])
    for line in physical_lines(text)[:_HEADER_SCAN_LINES]:
        for delimiter in DELIMITERS:
            cells = [c.strip() for c in _split_line(line, delimiter) if c.strip()]
            if len(cells) < 3:
                continue
            names = [" ".join(re.sub(r"[()\[\]#/]", " ", normalise_header(c)).split()) for c in cells]
            quantity = [c for c, n in zip(cells, names) if set(n.split()) & _QUANTITY_WORDS]
            valuation = [c for c, n in zip(cells, names) if _VALUATION.search(n)]
            if quantity and valuation:
                told = ", ".join(map(repr, quantity + valuation))[:120]
                return f"a holdings table (columns {told}) states what is held"
            balances = [c for c, n in zip(cells, names) if _BALANCE.search(n)]
            if len(balances) < 2:
                continue
            roles = match_columns(cells).roles
            beside = {i for r in ("date", "account", "currency") for i in roles.get(r, [])}
            if len(balances) + len(beside) == len(cells):
                return f"a balances table (columns {', '.join(map(repr, balances))[:120]}) states balances"
    return None


def looks_delimited(head: bytes) -> bool:
    """Whether a file's first bytes read as a delimited table: text, with a transaction header or a consistent
    field count over its lines."""
    if b"\x00" in head[:4096] and not head.startswith((b"\xff\xfe", b"\xfe\xff")) and not utf16_without_bom(head):
        return False
    _, text, cand = _decode_best(head)
    if cand is not None:
        return True
    complete = physical_lines(text)[:-1] if len(head) >= 64 * 1024 else physical_lines(text)  # drop a cut line
    return len([ln for ln in complete if ln.strip()]) >= 2 and _headerless_layout("\n".join(complete)) is not None


def parse_delimited(data: bytes, profile: Any = None) -> RawTable:
    """Decode, sniff and split a delimited export (as `profile` says where given). Raises NotATable with a reason."""
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")) and not utf16_without_bom(data):
        raise NotATable("binary file (NUL bytes), not a text export")
    misfit = None
    if profile is not None:
        try:
            return _parse_with_profile(data, profile)
        except ProfileMismatch as exc:
            if not profile.shipped:
                raise
            misfit = f"{exc}; layout detected instead"
    table = _detect_delimited(data)
    if misfit:
        table.notes.insert(0, misfit)
    return table


def _detect_delimited(data: bytes) -> RawTable:
    enc, text, cand = _decode_best(data)
    if not text.strip():
        raise NotATable("empty file")
    if cand is not None and cand.header_index is not None:
        lines = physical_lines(text)
        header = _split([lines[cand.header_index]], cand.delimiter)[0]
        rows, bad = _records(text, cand.delimiter, cand.header_index + 1)
        return RawTable(header=[h.strip() for h in header], rows=rows, match=cand.match, encoding=enc,
                        delimiter=cand.delimiter, preamble=lines[: cand.header_index], bad_records=bad)
    layout = _headerless_layout(text)
    if layout is None:
        raise NotATable("no header with a date and an amount column, and no consistent delimited layout")
    delimiter, modal, _ = layout
    records, bad = _records(text, delimiter, 0)
    first = next((k for k, (_, rec) in enumerate(records) if len(rec) == modal), 0)
    preamble = [delimiter.join(rec) for _, rec in records[:first]]
    body = records[first:]
    if len(body) > 1 and looks_like_header(body[0][1]):  # names nobody listed as synonyms: Greek, Japanese, ...
        header = [h.strip() for h in body[0][1]]
        body = body[1:]
        match = complete_roles(match_columns(header), body, modal)
        headerless, note = False, "header names not recognised; column roles read from the cells"
    else:
        header = [f"column_{i + 1}" for i in range(modal)]
        match = infer_roles(body, modal)
        headerless, note = True, "no header row; column roles inferred from cell contents"
    if match.score < 10:
        where = f" among {header[:12]}" if not headerless else " in a table without a header row"
        if match.undecided.get("amount") and match.first("date") is not None:
            cols = ", ".join(str(i + 1) for i in match.undecided["amount"])
            raise NotATable(f"columns {cols} could each hold the amount (or split it into money out and in) and "
                            f"no name or running balance tells which{where}: name them in a bank profile")
        raise NotATable("no column of dates and amounts could be identified" + where)
    return RawTable(header=header, rows=body, match=match, encoding=enc, delimiter=delimiter, headerless=headerless,
                    preamble=preamble, notes=[note], bad_records=bad)
