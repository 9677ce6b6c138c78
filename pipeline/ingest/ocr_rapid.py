"""RapidOCR (PaddleOCR's PP-OCR detection and recognition models) as the default OCR engine.

Chosen over Tesseract on the shared phone-quality receipt scans: more of their totals, dates and issuers read, in
less time per page (docs/eval/ocr-settings.md). The models ship inside the `rapidocr` wheel, so nothing is
downloaded at run time. Its boxes come without a reading order; `ocr_layout.reading_order` gives them one.

The models run on OpenVINO where it is installed (the project's dependency) and on onnxruntime otherwise: the
same ONNX files, more pages per second on OpenVINO, and the same text, since both run them in float32
(docs/eval/ocr-settings.md, docs/bench/real/README.md).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pipeline.ingest.ocr_layout import TextBox, reading_order
from pipeline.ingest.ocr_spaces import restore_spaces

# A page read the right way up scores about 0.97 (length-weighted mean recognition score on the shared receipts);
# the same page turned 90 or 180 degrees about 0.67. Below this, the other three turns are read and the best kept.
UPRIGHT_SCORE = 0.85
RUNTIMES = ("auto", "openvino", "onnxruntime")
# The detection and recognition models the wheel ships (its default configuration's), by task.
_SHIPPED = {"det": "PP-OCRv6_det_small.onnx", "rec": "PP-OCRv6_rec_small.onnx"}


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # not installed, or its native parts fail to load
        return False
    return True


@lru_cache(maxsize=4)
def rapid_runtime(runtime: str = "auto") -> str | None:
    """The runtime `runtime` resolves to ('auto': OpenVINO, else onnxruntime), or None when RapidOCR or that
    runtime is missing. RapidOCR is always built on onnxruntime (`_run_on_openvino`), so neither works without
    it."""
    if runtime not in RUNTIMES:
        raise ValueError(f"OCR runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    if not _importable("rapidocr") or not _importable("onnxruntime"):
        return None
    if runtime in ("auto", "openvino") and _importable("openvino") and _shipped_models() is not None:
        return "openvino"
    return "onnxruntime" if runtime in ("auto", "onnxruntime") else None


@lru_cache(maxsize=4)
def rapid_name(runtime: str = "auto") -> str | None:
    """'rapidocr 3.10.0 (PP-OCR, openvino)', or None when rapidocr or the runtime is missing."""
    # lazy: only OCR'd pages need it
    from importlib.metadata import version

    chosen = rapid_runtime(runtime)
    return f"rapidocr {version('rapidocr')} (PP-OCR, {chosen})" if chosen else None


def _shipped_models() -> dict[str, Path] | None:
    # lazy: only OCR'd pages need it
    import rapidocr

    models = {task: Path(rapidocr.__file__).parent / "models" / name for task, name in _SHIPPED.items()}
    return models if all(p.is_file() for p in models.values()) else None


@lru_cache(maxsize=2)
def _engine(threads: int | None = None, runtime: str = "auto") -> Any:
    """One engine per process: loading the models takes a moment, and a worker reads many pages."""
    # lazy: only OCR'd pages need it
    from rapidocr import RapidOCR

    # text-line direction classification off: a page's orientation is settled for the whole page below
    params: dict[str, Any] = {"Global.log_level": "error", "Global.use_cls": False}
    if threads is not None:
        params |= {"EngineConfig.onnxruntime.intra_op_num_threads": threads,
                   "EngineConfig.onnxruntime.inter_op_num_threads": 1}
    openvino = rapid_runtime(runtime) == "openvino"
    if openvino:
        models = _shipped_models() or {}
        params |= {"Det.model_path": str(models["det"]), "Rec.model_path": str(models["rec"])}
    engine = RapidOCR(params=params)
    if openvino:
        _run_on_openvino(engine, models, threads)
    return engine


class _OpenVinoSession:
    """One model compiled by OpenVINO, called as RapidOCR calls its own sessions (an array in, the first output
    out)."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self._request = compiled.create_infer_request()

    def __call__(self, inputs: Any) -> Any:
        self._request.infer([inputs])
        return self._request.get_output_tensor().data.copy()  # the request's buffer is reused by the next call


def _run_on_openvino(engine: Any, models: dict[str, Path], threads: int | None) -> None:
    """Run the detection and recognition models of an engine RapidOCR built on onnxruntime on OpenVINO instead,
    compiled in float32 on `threads` threads.

    Written here because RapidOCR's own OpenVINO session takes no precision setting, and OpenVINO's CPU plugin runs
    a model in bfloat16 where the CPU has bf16 instructions: that changed the text of most shared receipts (a digit,
    a letter: docs/eval/ocr-settings.md), while float32 gives onnxruntime's text exactly. RapidOCR is built on
    onnxruntime first (a cheap load that also reads the recogniser's character list from the model) rather than on
    its OpenVINO session, which would compile both models once more in bfloat16 for nothing. It reaches into
    RapidOCR's loaded parts (`text_det.session`, pinned by the `rapidocr<4` requirement); a test checks the
    precision."""
    # lazy: only OCR'd pages need it
    import openvino

    # Unpinned: OpenVINO binds its threads to cores counted from the first, so two one-thread OCR workers
    # (`--ocr-workers 2`) were both bound to core 0 and shared it (docs/bench/real/README.md, session 40).
    config = ({"INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False}
              | ({"INFERENCE_NUM_THREADS": str(threads)} if threads else {}))
    core = openvino.Core()
    for part, task in ((engine._load_det_model(), "det"), (engine._load_rec_model(), "rec")):
        part.session = _OpenVinoSession(core.compile_model(core.read_model(models[task]), "CPU", config))


def _read(image: Any, threads: int | None = None, runtime: str = "auto") -> tuple[float, list[TextBox]]:
    """(length-weighted mean recognition score, boxes) of one image. A box taller than wide scores nothing: the
    recogniser turns such a crop and often reads it well, but a page whose lines stand upright is a page on its
    side."""
    # lazy: only OCR'd pages need it
    import numpy as np

    out = _engine(threads, runtime)(np.asarray(image.convert("RGB")))
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


def rapid_read(image: Any, notes: list[str], page: int, threads: int | None = None, runtime: str = "auto",
               restore: bool = False) -> str:
    """The page's text, read the right way up: a page that reads poorly as it is is also read turned by 90, 180 and
    270 degrees, and the turn that reads best is kept. With `restore`, the word spaces the recogniser dropped in the
    letterhead are put back from Tesseract's reading of the same lines (`ocr_spaces`)."""
    score, boxes = _read(image, threads, runtime)
    if boxes and score < UPRIGHT_SCORE:  # a page with no text at all has no orientation to find
        best = (score, 0, boxes, image)
        for turn in (90, 180, 270):
            # white, not black, margins
            turned_image = image.rotate(-turn, expand=True, fillcolor=255)
            turned = _read(turned_image, threads, runtime)
            if turned[0] > best[0]:
                best = (turned[0], turn, turned[1], turned_image)
        if best[1]:
            notes.append(f"page {page} turned {best[1]} degrees before OCR")
        boxes, image = best[2], best[3]
    if restore and boxes:
        boxes, changed = restore_spaces(image, boxes)
        if changed:
            notes.append(f"page {page}: word spaces put back in {changed} line(s) from Tesseract's reading")
    return reading_order(boxes)
