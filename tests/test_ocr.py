"""OCR of PDF pages without a text layer (RapidOCR by default, Tesseract where asked or RapidOCR is absent): an
image-only PDF becomes a document whose row says which pages were OCRed, sideways scans are turned first, and
NeedsOCR stays only for pages OCR cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.ingest import IngestLimits, ingest
from pipeline.ingest.ocr import OcrSettings, engine, ocr_pdf_pages
from pipeline.ingest.ocr_rapid import _engine, rapid_runtime
from tests.helpers.scans import LINES, image_only_pdf

needs_ocr = pytest.mark.skipif(engine() is None, reason="no OCR engine installed (rapidocr, or Tesseract)")
needs_tesseract = pytest.mark.skipif(engine("tesseract") is None, reason="Tesseract not installed (scripts/setup.sh)")
REAL = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "pdf_edge"


@needs_ocr
def test_image_only_pdf_is_read_by_ocr_and_its_row_says_so(tmp_path: Path) -> None:
    image_only_pdf(tmp_path / "scan.pdf", LINES)
    res = ingest(tmp_path)
    assert res.errors.num_rows == 0
    doc = res.documents.to_pylist()[0]
    assert doc["ocr_pages"] == [1] and doc["ocred_pages"] == [1] and not doc["needs_ocr"]
    assert doc["ocr_engine"] == engine()
    for token in ("2024-0117", "Stadtwerke", "1.234,56"):
        assert token in doc["text"]


@needs_ocr
def test_sideways_scan_is_turned_before_ocr(tmp_path: Path) -> None:
    image_only_pdf(tmp_path / "sideways.pdf", LINES * 3, rotate=90)
    doc = ingest(tmp_path).documents.to_pylist()[0]
    assert "Stadtwerke" in doc["text"] and "1.234,56" in doc["text"]


@needs_ocr
def test_only_the_pages_without_text_layer_are_ocred(tmp_path: Path) -> None:
    image_only_pdf(tmp_path / "mixed.pdf", LINES, text_page="Cover letter with a text layer")
    doc = ingest(tmp_path).documents.to_pylist()[0]
    assert doc["ocr_pages"] == [2] and doc["ocred_pages"] == [2]
    assert doc["text"].startswith("Cover letter") and "Stadtwerke" in doc["text"]


@needs_ocr
def test_blank_scan_stays_needs_ocr_with_the_reason(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("L", (800, 1100), 255).save(tmp_path / "blank.pdf", format="PDF")
    res = ingest(tmp_path)
    assert res.documents.num_rows == 0
    err = res.errors.to_pylist()[0]
    assert err["error_class"] == "NeedsOCR" and "OCR found no text" in err["message"]


def test_ocr_off_keeps_needs_ocr(tmp_path: Path) -> None:
    pytest.importorskip("pypdfium2")
    image_only_pdf(tmp_path / "scan.pdf", LINES)
    res = ingest(tmp_path, limits=IngestLimits(ocr=False))
    err = res.errors.to_pylist()[0]
    assert err["error_class"] == "NeedsOCR" and "OCR is off" in err["message"]


@needs_ocr
def test_ocr_timeout_is_the_documents_error_not_the_runs(tmp_path: Path) -> None:
    image_only_pdf(tmp_path / "scan.pdf", LINES)
    (tmp_path / "log.csv").write_text("date,amount,currency\n2024-01-02,1.00,EUR\n", encoding="utf-8")
    res = ingest(tmp_path, limits=IngestLimits(ocr_seconds_per_page=0.01, parse_seconds=0.5))
    err = res.errors.to_pylist()[0]
    assert err["error_class"] == "NeedsOCR" and "FileTimeout" in err["message"]
    assert res.transactions.num_rows == 1


@needs_ocr
@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/realdata/pdf_edge not present")
def test_real_scans_yield_their_text(tmp_path: Path) -> None:
    import difflib
    import re
    import shutil

    for scan in REAL.glob("scan_*.pdf"):
        shutil.copy(scan, tmp_path / scan.name)
    res = ingest(tmp_path)
    docs = {d["source_file"]: d for d in res.documents.to_pylist()}
    assert res.errors.num_rows == 0 and len(docs) == len(list(REAL.glob("scan_*.pdf")))
    assert all(d["ocred_pages"] == list(range(1, d["page_count"] + 1)) for d in docs.values())
    reference = (REAL / "scan_linn-brochure_image-only.txt").read_text(encoding="utf-8")
    ocred = docs["scan_linn-brochure_image-only.pdf"]["text"]
    words = [re.findall(r"[a-z0-9]+", t.lower()) for t in (reference, ocred)]
    assert difflib.SequenceMatcher(None, *words, autojunk=False).ratio() > 0.9


@needs_ocr
@pytest.mark.parametrize("rotate", [90, 180, 270])
def test_a_scan_turned_any_way_reads_upright(tmp_path: Path, rotate: int) -> None:
    scan = image_only_pdf(tmp_path / "turned.pdf", LINES * 2, rotate=rotate)
    result = ocr_pdf_pages(scan.read_bytes(), [1])
    text = result.texts[1]
    # the lines come back in printed order, not bottom to top
    assert text.index("RECHNUNG") < text.index("Stadtwerke") < text.index("1.234,56")
    assert any("turned" in note for note in result.notes)


@needs_tesseract
def test_tesseract_is_still_there_when_asked_for(tmp_path: Path) -> None:
    scan = image_only_pdf(tmp_path / "scan.pdf", LINES)
    result = ocr_pdf_pages(scan.read_bytes(), [1], OcrSettings(engine="tesseract"))
    assert result.engine.startswith("tesseract") and "Stadtwerke" in result.texts[1]


def test_an_unknown_engine_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="OCR engine must be one of"):
        engine("paddle")


@needs_ocr
def test_scans_read_by_several_workers_keep_their_place_and_text(tmp_path: Path) -> None:
    from fpdf import FPDF

    for name in ("a_text.pdf", "e_text.pdf"):
        doc = FPDF()
        doc.add_page()
        doc.set_font("Helvetica", size=12)
        doc.cell(0, 10, f"Invoice {name} with a text layer")
        doc.output(str(tmp_path / name))
    image_only_pdf(tmp_path / "b_scan.pdf", LINES)
    image_only_pdf(tmp_path / "d_scan.pdf", ["Quittung Nr. 77", "Backerei Korn KG", "Summe 12,80 EUR"])
    from PIL import Image

    Image.new("L", (800, 1100), 255).save(tmp_path / "c_blank.pdf", format="PDF")
    one, two = (ingest(tmp_path, limits=IngestLimits(ocr_workers=n)) for n in (1, 2))
    for res in (one, two):
        assert res.documents.column("source_file").to_pylist() == ["a_text.pdf", "b_scan.pdf", "d_scan.pdf",
                                                                   "e_text.pdf"]
        assert [(e["source_file"], e["error_class"]) for e in res.errors.to_pylist()] == [("c_blank.pdf", "NeedsOCR")]
        assert res.seconds["ocr"] > 0
    assert one.documents.column("text").to_pylist() == two.documents.column("text").to_pylist()
    assert "Backerei Korn" in two.documents.column("text")[2].as_py()
    assert one.files.to_pylist() == two.files.to_pylist()


def test_ocr_processes_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.ingest.limits as limits

    monkeypatch.setattr(limits, "usable_cores", lambda: 4)
    assert IngestLimits().ocr_threads() == 4  # one process, every core
    assert IngestLimits(ocr_workers=2).ocr_threads() == 2
    assert IngestLimits(ocr_workers=8).ocr_threads() == 1


@needs_ocr
def test_a_scan_rewritten_while_its_pages_are_read_is_left_out_with_its_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline.ingest.discover as discover

    image_only_pdf(tmp_path / "a_scan.pdf", LINES)
    image_only_pdf(tmp_path / "b_scan.pdf", LINES[:2])
    read = discover._with_ocr

    def rewritten_meanwhile(job, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = read(job, *args, **kwargs)
        if job.path.name == "a_scan.pdf":
            job.path.write_bytes(job.path.read_bytes() + b"\n% appended by the scanner\n")
        return out

    monkeypatch.setattr(discover, "_with_ocr", rewritten_meanwhile)
    res = ingest(tmp_path, limits=IngestLimits(ocr_workers=2))
    assert res.documents.column("source_file").to_pylist() == ["b_scan.pdf"]
    assert [(e["source_file"], e["error_class"]) for e in res.errors.to_pylist()] == [("a_scan.pdf", "FileChanged")]
    assert {f["source_file"]: f["status"] for f in res.files.to_pylist()} == {"a_scan.pdf": "error", "b_scan.pdf": "ok"}


both_runtimes = pytest.mark.skipif(rapid_runtime("openvino") is None or rapid_runtime("onnxruntime") is None,
                                   reason="needs RapidOCR with both OpenVINO and onnxruntime installed")
RECEIPTS = REAL.parent / "receipts"


@both_runtimes
def test_openvino_reads_in_float32_the_text_onnxruntime_reads(tmp_path: Path) -> None:
    data = image_only_pdf(tmp_path / "turned.pdf", LINES * 2, rotate=180).read_bytes()
    ort, ov = (ocr_pdf_pages(data, [1], OcrSettings(runtime=r)) for r in ("onnxruntime", "openvino"))
    assert ov.texts == ort.texts and ov.notes == ort.notes and "Stadtwerke" in ov.texts[1]
    assert ov.engine.endswith("openvino)") and ort.engine.endswith("onnxruntime)")
    assert OcrSettings(runtime="openvino").label() != OcrSettings(runtime="onnxruntime").label()  # cache keys
    import openvino

    loaded = _engine(None, "openvino")
    for part in (loaded.text_det, loaded.text_rec):  # bf16 on CPUs that have it, unless told: another text
        compiled = part.session.compiled
        assert compiled.get_property("INFERENCE_PRECISION_HINT") == openvino.Type.f32


@both_runtimes
def test_openvino_ocr_workers_are_not_bound_to_the_same_core() -> None:
    # OpenVINO binds a compiled model's threads to cores counted from the first: every one-thread worker of
    # `--ocr-workers N` would share core 0
    for threads in (1, None):
        loaded = _engine(threads, "openvino")
        for part in (loaded.text_det, loaded.text_rec):
            assert part.session.compiled.get_property("ENABLE_CPU_PINNING") is False


@both_runtimes
@pytest.mark.skipif(not RECEIPTS.is_dir(), reason="../shared/realdata/receipts not present")
def test_openvino_and_onnxruntime_read_real_receipts_alike() -> None:
    for pdf in sorted(RECEIPTS.glob("*.pdf"))[:3]:
        data = pdf.read_bytes()
        ort, ov = (ocr_pdf_pages(data, [1], OcrSettings(runtime=r)) for r in ("onnxruntime", "openvino"))
        assert ov.texts == ort.texts and ov.texts[1].strip(), pdf.name
