"""OCR for PDF pages without a text layer: pypdfium2 renders the page, an OCR engine reads it.

Engines: RapidOCR (PP-OCR models on OpenVINO or onnxruntime, `pipeline.ingest.ocr_rapid`) by default, Tesseract
(`pipeline.ingest.ocr_tesseract`) where RapidOCR is not installed or when asked for. Each image-only page is
rendered at its scanned image's own resolution (`OcrSettings`, chosen with `scripts/ocr_settings.py` on the shared
scanned receipts; figures: docs/eval/ocr-settings.md). Without either engine OCR is off and image-only pages stay
`NeedsOCR`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from pipeline.ingest.ocr_rapid import rapid_name, rapid_read
from pipeline.ingest.ocr_spaces import LANGUAGE as SPACES_LANGUAGE
from pipeline.ingest.ocr_tesseract import languages, tesseract_name, tesseract_read

DPI = 300  # for pages whose image resolution cannot be read (vector pages, several images)
ENGINES = ("auto", "rapidocr", "tesseract")


@dataclass
class OcrResult:
    """Text per 1-based page number (pages OCR could not read are absent) and what happened to each."""

    engine: str
    texts: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _installed(which: str, runtime: str = "auto") -> tuple[str, str] | None:
    """(engine, its name and version) that `which` resolves to ('auto': RapidOCR, else Tesseract), or None;
    `runtime`: RapidOCR's (`ocr_rapid.RUNTIMES`)."""
    if which not in ENGINES:
        raise ValueError(f"OCR engine must be one of {', '.join(ENGINES)}, not {which!r}")
    if which in ("auto", "rapidocr") and (name := rapid_name(runtime)):
        return "rapidocr", name
    if which in ("auto", "tesseract") and (name := tesseract_name()):
        return "tesseract", name
    return None


def engine(which: str = "auto", runtime: str = "auto") -> str | None:
    """Name and version of the engine `which` resolves to, or None when it is not installed."""
    found = _installed(which, runtime)
    return found[1] if found else None


@dataclass(frozen=True)
class OcrSettings:
    """How a page is read. `dpi=None` renders each image-only page at its scanned image's own pixel density
    (no resampling of a phone photo into a 300 dpi page several times its size), never below `min_dpi`. `psm` and
    `languages` are Tesseract's: automatic page segmentation (mode 3), since mode 4 (one column) read receipts
    slightly better but lost much of a two-column brochure; None: every installed one of its LANGUAGES."""

    engine: str = "auto"
    dpi: int | None = None
    min_dpi: int = 150
    psm: int = 3
    languages: str | None = None
    threads: int | None = None  # RapidOCR's threads (None: its runtime's default, every core); the text is the same
    runtime: str = "auto"  # RapidOCR's: OpenVINO where installed, else onnxruntime (ocr_rapid.RUNTIMES)
    spaces: bool = True  # RapidOCR's dropped word spaces put back from Tesseract's reading, where it is installed

    def restores_spaces(self) -> bool:
        """Whether RapidOCR's dropped word spaces are put back: asked for, and Tesseract installed."""
        return self.spaces and tesseract_name() is not None

    def label(self) -> str:
        kind, name = _installed(self.engine, self.runtime) or (self.engine, self.engine)
        if kind == "tesseract":
            return f"{name},dpi={self.dpi or 'native'},psm={self.psm},lang={self.languages or languages()}"
        spaces = f",spaces={tesseract_name()},spaces_lang={SPACES_LANGUAGE}" if self.restores_spaces() else ""
        return f"{name},dpi={self.dpi or 'native'},orientation=checked,layout=columns{spaces}"


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
    """Read `pages` (1-based) of the PDF in `data`. Raises RuntimeError when the engine is not installed."""
    found = _installed(settings.engine, settings.runtime)
    if found is None:
        raise RuntimeError("no OCR engine: install rapidocr with onnxruntime, and openvino to run it faster "
                           "(the project's dependencies), or Tesseract (scripts/setup.sh) and pytesseract")
    # lazy: only OCR'd pages need it
    import pypdfium2 as pdfium

    kind, name = found
    tesseract = kind == "tesseract"
    if tesseract and settings.languages is not None:
        name = f"tesseract ({settings.languages})"
    result = OcrResult(engine=name)
    pdf = pdfium.PdfDocument(io.BytesIO(data))
    try:
        for number in pages:
            page = pdf[number - 1]
            dpi = settings.dpi or max(settings.min_dpi, min(600.0, _native_dpi(page) or DPI))
            image = page.render(scale=dpi / 72).to_pil().convert("L")  # /Rotate is applied by the renderer
            page.close()
            if tesseract:
                text = tesseract_read(image, result.notes, number, settings.languages, settings.psm)
            else:
                text = rapid_read(image, result.notes, number, settings.threads, settings.runtime,
                                  settings.restores_spaces())
            if text.strip():
                result.texts[number] = text
            else:
                result.notes.append(f"page {number}: OCR found no text")
    finally:
        pdf.close()
    return result
