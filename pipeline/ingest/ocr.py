"""OCR for PDF pages without a text layer: pypdfium2 renders the page, Tesseract (through pytesseract) reads it.

Each image-only page is rendered at its scanned image's own resolution (`OcrSettings`, chosen with
`scripts/ocr_settings.py` on the shared scanned receipts). Tesseract rather than RapidOCR: it read the shared scans'
words far more exactly (RapidOCR's bundled models run Latin words together). Tesseract's orientation detection
(OSD) turns pages scanned sideways or upside down before they are read. It runs single-threaded
(OMP_THREAD_LIMIT=1): its own OpenMP threads slowed a page down on a busy machine. Figures: docs/eval/ocr-settings.md
and docs/bench/design-choices.md.
Tesseract is a Debian package (`scripts/setup.sh` installs it with the language packs); without it OCR is off and
image-only pages stay `NeedsOCR`.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

DPI = 300  # for pages whose image resolution cannot be read (vector pages, several images)
# Languages of the documents this pipeline reads; those installed are used together.
LANGUAGES = ("eng", "deu", "fra", "nld", "spa")
_ROTATE = re.compile(r"Rotate:\s*(\d+)")
_CONFIDENCE = re.compile(r"Orientation confidence:\s*([\d.]+)")


@dataclass
class OcrResult:
    """Text per 1-based page number (pages OCR could not read are absent) and what happened to each."""

    engine: str
    texts: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@lru_cache(maxsize=1)
def engine() -> str | None:
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


def _mean_confidence(image, langs: str, config: str) -> float:  # type: ignore[no-untyped-def]
    """Tesseract's mean word confidence on the image (0-100; -1 where it reads no word)."""
    # lazy: only OCR'd pages need it
    import pytesseract

    data = pytesseract.image_to_data(image, lang=langs, config=config, output_type=pytesseract.Output.DICT)
    confs = [float(c) for c, w in zip(data["conf"], data["text"]) if str(w).strip() and float(c) >= 0]
    return sum(confs) / len(confs) if confs else -1.0


def _read_upright(image, notes: list[str], page: int, langs: str, config: str) -> str:  # type: ignore[no-untyped-def]
    """The page's text, read the right way up. Tesseract's orientation detection (OSD) proposes a turn; since it
    also proposes turning upright pages of dense receipt print upside down (5 of the shared receipt scans, taken
    for Greek script), a proposed turn is kept only when the turned page reads with higher word confidence."""
    # lazy: only OCR'd pages need it
    import pytesseract

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


@dataclass(frozen=True)
class OcrSettings:
    """How a page is read. `dpi=None` renders each image-only page at its scanned image's own pixel density
    (no resampling of a phone photo into a 300 dpi page several times its size), never below `min_dpi`, with
    Tesseract's automatic page segmentation (mode 3): more gold fields found, faster, than at 300 dpi; mode 4 (one
    column) read receipts slightly better but lost much of a two-column brochure (docs/eval/ocr-settings.md)."""

    dpi: int | None = None
    min_dpi: int = 150
    psm: int = 3
    languages: str | None = None  # '+'-joined Tesseract codes; None: every installed one of LANGUAGES

    def label(self) -> str:
        return f"dpi={self.dpi or 'native'},psm={self.psm},lang={self.languages or languages()},orientation=checked"


def _native_dpi(page) -> float | None:  # type: ignore[no-untyped-def]
    """Pixel density of the largest image on the page (pixels per inch of its placed width), or None."""
    # lazy: only OCR'd pages need it
    import pypdfium2 as pdfium

    best = None
    for obj in page.get_objects():
        if obj.type != pdfium.raw.FPDF_PAGEOBJ_IMAGE:
            continue
        width_px, _ = obj.get_px_size()
        left, _, right, _ = obj.get_bounds()
        if right - left > 1 and (best is None or width_px > best[0]):
            best = (width_px, width_px / ((right - left) / 72.0))
    return best[1] if best else None


def ocr_pdf_pages(data: bytes, pages: list[int], settings: OcrSettings = OcrSettings()) -> OcrResult:
    """Read `pages` (1-based) of the PDF in `data`. Raises RuntimeError when no OCR engine is installed."""
    name = engine()
    if name is None:
        raise RuntimeError("no OCR engine: install Tesseract (scripts/setup.sh does) and pytesseract")
    # lazy: only OCR'd pages need it
    import pypdfium2 as pdfium

    os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # read by the tesseract processes pytesseract starts
    langs = settings.languages or languages()
    result = OcrResult(engine=name if settings.languages is None else f"tesseract ({langs})")
    pdf = pdfium.PdfDocument(io.BytesIO(data))
    try:
        for number in pages:
            page = pdf[number - 1]
            dpi = settings.dpi or max(settings.min_dpi, min(600.0, _native_dpi(page) or DPI))
            image = page.render(scale=dpi / 72).to_pil().convert("L")  # /Rotate is applied by the renderer
            page.close()
            text = _read_upright(image, result.notes, number, langs, f"--psm {settings.psm}")
            if text.strip():
                result.texts[number] = text
            else:
                result.notes.append(f"page {number}: OCR found no text")
    finally:
        pdf.close()
    return result
