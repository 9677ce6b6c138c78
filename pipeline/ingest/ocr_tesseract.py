"""Tesseract (through pytesseract) as the OCR engine where RapidOCR is not installed, or when asked for.

Tesseract's orientation detection (OSD) turns pages scanned sideways or upside down before they are read. It runs
single-threaded (OMP_THREAD_LIMIT=1): its own OpenMP threads slowed a page down on a busy machine. Tesseract is a
Debian package (`scripts/setup.sh` installs it with the language packs).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

# Languages of the documents this pipeline reads; those installed are used together.
LANGUAGES = ("eng", "deu", "fra", "nld", "spa")
_ROTATE = re.compile(r"Rotate:\s*(\d+)")
_CONFIDENCE = re.compile(r"Orientation confidence:\s*([\d.]+)")


@lru_cache(maxsize=1)
def tesseract_name() -> str | None:
    """'tesseract 5.3.0 (eng+deu)', or None when Tesseract or pytesseract is missing."""
    try:
        # lazy: only OCR'd pages need it
        import pytesseract

        version = pytesseract.get_tesseract_version()
        langs = languages()
    except Exception:  # pytesseract absent, binary absent or broken
        return None
    return f"tesseract {version} ({langs})" if langs else None


@lru_cache(maxsize=1)
def languages() -> str:
    # lazy: only OCR'd pages need it
    import pytesseract

    installed = set(pytesseract.get_languages(config=""))
    return "+".join(lang for lang in LANGUAGES if lang in installed)


@dataclass(frozen=True)
class Word:
    """One word Tesseract read, with its confidence (0-100) and its box's left edge, top and height in pixels."""

    text: str
    conf: float
    left: int
    top: int
    height: int


def _pytesseract():  # type: ignore[no-untyped-def]
    """pytesseract, with the tesseract processes it starts single-threaded (OMP_THREAD_LIMIT, read by them)."""
    # lazy: only OCR'd pages need it
    import pytesseract

    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    return pytesseract


def tesseract_words(image, langs: str, config: str) -> list[Word]:  # type: ignore[no-untyped-def]
    """The words Tesseract reads in the image (one process, single-threaded like every Tesseract call here)."""
    pytesseract = _pytesseract()
    data = pytesseract.image_to_data(image, lang=langs, config=config, output_type=pytesseract.Output.DICT)
    return [Word(str(t), float(c), int(x), int(y), int(h))
            for t, c, x, y, h in zip(data["text"], data["conf"], data["left"], data["top"], data["height"])
            if str(t).strip()]


def _mean_confidence(image, langs: str, config: str) -> float:  # type: ignore[no-untyped-def]
    """Tesseract's mean word confidence on the image (0-100; -1 where it reads no word)."""
    confs = [w.conf for w in tesseract_words(image, langs, config) if w.conf >= 0]
    return sum(confs) / len(confs) if confs else -1.0


def tesseract_read(image, notes: list[str], page: int, langs: str | None, psm: int) -> str:  # type: ignore[no-untyped-def]
    """The page's text, read the right way up. Tesseract's orientation detection (OSD) proposes a turn; since it
    also proposes turning upright pages of dense receipt print upside down (5 of the shared receipt scans, taken
    for Greek script), a proposed turn is kept only when the turned page reads with higher word confidence."""
    pytesseract = _pytesseract()
    langs = langs or languages()
    config = f"--psm {psm}"
    try:
        osd = pytesseract.image_to_osd(image, config="--psm 0")
    except pytesseract.TesseractError:  # too little text to tell the orientation
        osd = ""
    rotate = int(m.group(1)) if (m := _ROTATE.search(osd)) else 0
    confidence = float(m.group(1)) if (m := _CONFIDENCE.search(osd)) else 0.0
    if rotate and confidence >= 1.0:
        turned = image.rotate(-rotate, expand=True)
        if _mean_confidence(turned, langs, config) > _mean_confidence(image, langs, config):
            notes.append(f"page {page} turned {rotate} degrees before OCR")
            image = turned
        else:
            notes.append(f"page {page}: orientation detection proposed {rotate} degrees; the page reads better as is")
    return pytesseract.image_to_string(image, lang=langs, config=config)
