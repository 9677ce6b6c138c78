"""RapidOCR (PaddleOCR's PP-OCR detection and recognition models run by onnxruntime) as the default OCR engine.

Chosen over Tesseract on the shared phone-quality receipt scans: more of their totals, dates and issuers read, in
less time per page (docs/eval/ocr-settings.md). The models ship inside the `rapidocr` wheel, so nothing is
downloaded at run time. Its boxes come without a reading order; `ocr_layout.reading_order` gives them one.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pipeline.ingest.ocr_layout import TextBox, reading_order

# A page read the right way up scores about 0.97 (length-weighted mean recognition score on the shared receipts);
# the same page turned 90 or 180 degrees about 0.67. Below this, the other three turns are read and the best kept.
UPRIGHT_SCORE = 0.85


@lru_cache(maxsize=1)
def rapid_name() -> str | None:
    """'rapidocr 3.10.0 (PP-OCR, onnxruntime)', or None when rapidocr or onnxruntime is missing."""
    try:
        # lazy: only OCR'd pages need it
        from importlib.metadata import version

        import onnxruntime  # noqa: F401
        import rapidocr  # noqa: F401
    except Exception:  # not installed, or its native parts fail to load
        return None
    return f"rapidocr {version('rapidocr')} (PP-OCR, onnxruntime)"


@lru_cache(maxsize=1)
def _engine(threads: int | None = None) -> Any:
    """One engine per process: loading the models takes a moment, and a worker reads many pages."""
    # lazy: only OCR'd pages need it
    from rapidocr import RapidOCR

    # text-line direction classification off: a page's orientation is settled for the whole page below
    params: dict[str, Any] = {"Global.log_level": "error", "Global.use_cls": False}
    if threads is not None:
        params |= {"EngineConfig.onnxruntime.intra_op_num_threads": threads,
                   "EngineConfig.onnxruntime.inter_op_num_threads": 1}
    return RapidOCR(params=params)


def _read(image: Any, threads: int | None = None) -> tuple[float, list[TextBox]]:
    """(length-weighted mean recognition score, boxes) of one image. A box taller than wide scores nothing: the
    recogniser turns such a crop and often reads it well, but a page whose lines stand upright is a page on its
    side."""
    # lazy: only OCR'd pages need it
    import numpy as np

    out = _engine(threads)(np.asarray(image.convert("RGB")))
    if out.txts is None or out.boxes is None:
        return 0.0, []
    boxes, weight, total = [], 0, 0.0
    for corners, text, score in zip(out.boxes, out.txts, out.scores):
        xs, ys = [float(p[0]) for p in corners], [float(p[1]) for p in corners]
        boxes.append(TextBox(min(xs), min(ys), max(xs), max(ys), text))
        weight += len(text)
        if max(xs) - min(xs) >= max(ys) - min(ys) or len(text) < 2:
            total += float(score) * len(text)
    return (total / weight if weight else 0.0), boxes


def rapid_read(image: Any, notes: list[str], page: int, threads: int | None = None) -> str:
    """The page's text, read the right way up: a page that reads poorly as it is is also read turned by 90, 180 and
    270 degrees, and the turn that reads best is kept."""
    score, boxes = _read(image, threads)
    if boxes and score < UPRIGHT_SCORE:  # a page with no text at all has no orientation to find
        best = (score, 0, boxes)
        for turn in (90, 180, 270):
            turned = _read(image.rotate(-turn, expand=True, fillcolor=255), threads)  # white, not black, margins
            if turned[0] > best[0]:
                best = (turned[0], turn, turned[1])
        if best[1]:
            notes.append(f"page {page} turned {best[1]} degrees before OCR")
        boxes = best[2]
    return reading_order(boxes)
