"""A scan is OCRed once: a later run over the same output reads its page texts from OUTPUT/_cache/ocr, unless the
file, its pages, the OCR settings or the text version differ, or the run says --no-ocr-cache."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.config import RunConfig
from pipeline.ingest import ingest
from pipeline.ingest.ocr import OcrResult, engine
from pipeline.ingest.ocr_cache import RUN_CACHE_DIR, OcrCache
from pipeline.ingest.worker import FileWorker
from pipeline.output.report import inspect_output
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import FakeLLM
from tests.helpers.scans import LINES, image_only_pdf

needs_ocr = pytest.mark.skipif(engine() is None, reason="no OCR engine installed (rapidocr, or Tesseract)")


@pytest.fixture
def ocr_tasks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the ingest's worker processes were asked to OCR."""
    asked: list[str] = []
    parse = FileWorker.parse

    def counting(self: FileWorker, task, *args, **kwargs):  # type: ignore[no-untyped-def]
        if task.kind == "ocr":
            asked.append(task.source_file)
        return parse(self, task, *args, **kwargs)

    monkeypatch.setattr(FileWorker, "parse", counting)
    return asked


def _cfg(inp: Path, out: Path, model: Path, **kw: object) -> RunConfig:
    return RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False, **kw)


@needs_ocr
def test_a_rerun_reads_a_scan_from_the_cache_and_its_rows_are_the_same(tmp_path: Path, fake_model: Path,
                                                                        ocr_tasks: list[str]) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    image_only_pdf(inp / "scan.pdf", LINES)
    run_pipeline(_cfg(inp, out, fake_model), llm=FakeLLM())
    assert ocr_tasks == ["scan.pdf"] and len(list(out.joinpath(*RUN_CACHE_DIR).glob("*.json"))) == 1
    left = out.joinpath(*RUN_CACHE_DIR, ".0123abcd.json.tmp-4242")  # a killed run's half-written entry
    left.write_text('{"engine": "rapid')
    first = read_dataset(out, "documents").to_pylist()
    run_pipeline(_cfg(inp, out, fake_model, force=True), llm=FakeLLM())
    assert ocr_tasks == ["scan.pdf"] and not left.exists()  # not asked again; the half-written entry removed
    again = read_dataset(out, "documents").to_pylist()
    assert [(d["row_id"], d["ocred_pages"], d["ocr_engine"]) for d in again] == \
        [(d["row_id"], d["ocred_pages"], d["ocr_engine"]) for d in first]
    run_pipeline(_cfg(inp, out, fake_model, force=True, ocr_cache=False), llm=FakeLLM())
    assert ocr_tasks == ["scan.pdf", "scan.pdf"]
    buf = io.StringIO()
    inspect_output(out, Console(file=buf, width=300))
    assert "OCR cache: page texts of 1 scan(s)" in buf.getvalue()


@needs_ocr
def test_a_changed_file_or_text_version_is_read_again(tmp_path: Path, ocr_tasks: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    inp, cache = tmp_path / "in", tmp_path / "cache"
    inp.mkdir()
    image_only_pdf(inp / "scan.pdf", LINES)
    assert "Stadtwerke" in ingest(inp, ocr_cache=cache).documents.to_pylist()[0]["text"]
    ingest(inp, ocr_cache=cache)
    assert len(ocr_tasks) == 1
    image_only_pdf(inp / "scan.pdf", ["QUITTUNG Nr. 77", "Baeckerei Korn", "Summe 4,20 EUR"])
    text = ingest(inp, ocr_cache=cache).documents.to_pylist()[0]["text"]
    assert len(ocr_tasks) == 2 and "Korn" in text and "Stadtwerke" not in text
    monkeypatch.setattr("pipeline.ingest.ocr_cache.TEXT_VERSION", "changed-for-test")
    ingest(inp, ocr_cache=cache)
    assert len(ocr_tasks) == 3


def test_an_unreadable_entry_is_a_miss_and_an_unwritable_cache_costs_only_the_saving(tmp_path: Path) -> None:
    cache = OcrCache(tmp_path / "cache")
    result = OcrResult(engine="rapidocr 3", texts={2: "Gesamt 1,00 EUR"}, notes=["page 2 turned 90 degrees"])
    cache.put("ab" * 32, (2,), "rapidocr,dpi=native", result)
    assert cache.get("ab" * 32, (2,), "rapidocr,dpi=native") == result
    assert cache.get("ab" * 32, (2, 3), "rapidocr,dpi=native") is None  # other pages
    assert cache.get("ab" * 32, (2,), "tesseract,dpi=native") is None  # other settings
    entry = next((tmp_path / "cache").glob("*.json"))
    entry.write_text('{"engine": "rapidocr 3", "texts": [1, 2')  # cut short
    assert cache.get("ab" * 32, (2,), "rapidocr,dpi=native") is None
    (tmp_path / "file").write_text("")
    OcrCache(tmp_path / "file" / "cache").put("cd" * 32, (1,), "x", result)  # its folder cannot be made: no error
    assert not list(tmp_path.glob("**/.*.tmp-*"))
