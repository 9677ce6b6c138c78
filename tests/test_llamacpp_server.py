"""The llama.cpp server peer of the real workload (bench/llamacpp_server.py), against a fake llama-server that
speaks its HTTP API: a pipeline run through the peer sends the run's prompt token ids and JSON schemas, keeps at
most one request per slot in flight, and ends with the rows the same answers give in process; a request the server
refuses is that item's error row, not the run's end."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.llamacpp_server import LlamaCppServerLLM, ServerError
from pipeline.config import RunConfig
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import ByteTokenizer, FakeLLM
from tests.helpers.pipeline_inputs import make_pdf

SLOTS = 2


class FakeServer:
    """llama-server's /props, /health and /completion, answered by a FakeLLM (as the engine would be)."""

    def __init__(self, refuse: str | None = None) -> None:
        self.llm = FakeLLM()
        self.bodies: list[dict[str, Any]] = []
        self.in_flight = self.most_in_flight = 0
        self.refuse = refuse  # a prompt containing this text gets HTTP 400
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/props":
                    self._send(200, {"total_slots": SLOTS, "model_path": "/m/finextract-Q8_0.gguf",
                                     "default_generation_settings": {"n_ctx": 4096}})
                else:
                    self._send(200, {"status": "ok"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(*fake.complete(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.bodies.append(body)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            threading.Event().wait(0.02)  # long enough for requests to overlap
            prompt = body["prompt"]
            # the fake answers by the schema; its byte tokenizer only looks for markers (a real model's ids are
            # folded into bytes for it)
            as_bytes = [t % 256 for t in prompt]
            if self.refuse and self.refuse in self.llm.tokenizer.decode(as_bytes):
                return 400, {"error": {"message": "failed to parse grammar"}}
            params = SimpleNamespace(json_schema=body.get("json_schema"), max_tokens=body["n_predict"], logprobs=None)
            (out,) = list(self.llm.generate_stream([as_bytes], params))
            return 200, {"content": out.outputs[0].text, "tokens": out.outputs[0].token_ids, "stop_type": "eos",
                         "truncated": False, "timings": {"prompt_n": len(prompt) - 3, "cache_n": 3,
                                                         "prompt_ms": 5.0, "predicted_n": 4, "predicted_ms": 8.0}}
        finally:
            with self.lock:
                self.in_flight -= 1

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server() -> Any:
    s = FakeServer()
    yield s
    s.close()


def _inputs(root: Path, n: int = 5) -> Path:
    for i in range(n):
        make_pdf(root / f"inv{i}.pdf", [f"Invoice INV-{i} from Example Supplies GmbH, total 100.50 EUR"])
    return root


def _cfg(inputs: Path, out: Path, model: Path) -> RunConfig:
    return RunConfig(input_dir=inputs, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False)


def _documents(out: Path) -> dict[str, dict[str, Any]]:
    drop = {"row_id", "run_id", "created_at", "latency_s", "model_engine"}
    return {r["source_file"]: {k: v for k, v in r.items() if k not in drop}
            for r in read_dataset(out, "documents").to_pylist()}


def test_a_run_through_the_server_gives_the_rows_of_the_same_answers_in_process(
        server: FakeServer, tmp_path: Path, fake_model: Path) -> None:
    inputs = _inputs(tmp_path / "in")
    peer = LlamaCppServerLLM(server.url, fake_model, tokenizer=ByteTokenizer())
    assert peer.slots == SLOTS and peer.max_model_len == 4096
    summary = run_pipeline(_cfg(inputs, tmp_path / "peer", fake_model), llm=peer)
    run_pipeline(_cfg(inputs, tmp_path / "local", fake_model), llm=FakeLLM())
    assert summary.reconciliation["balanced"]
    got, want = _documents(tmp_path / "peer"), _documents(tmp_path / "local")
    assert len(got) == 5 and got == want
    # what travelled: the run's prompt token ids, each document's own schema, greedy, its token budget
    assert len(server.bodies) == 5 and server.most_in_flight == SLOTS
    for body in server.bodies:
        assert all(isinstance(t, int) for t in body["prompt"]) and body["temperature"] == 0.0
        assert "doc_type" in body["json_schema"]["properties"] and body["n_predict"] == 160
        assert body["cache_prompt"] and body["return_tokens"]
    stats = summary.manifest["engine_stats"]
    assert stats["requests"] == 5 and stats["cached_tokens"] == 15 and stats["generate_s"] > 0
    assert summary.manifest["engine_config"]["engine"] == "llama.cpp server"
    assert summary.manifest["engine_config"]["server_model"].endswith("Q8_0.gguf")


def test_a_request_the_server_refuses_is_that_items_error_row(tmp_path: Path, fake_model: Path) -> None:
    server = FakeServer(refuse="INV-3")
    try:
        inputs = _inputs(tmp_path / "in")
        peer = LlamaCppServerLLM(server.url, fake_model, tokenizer=ByteTokenizer())
        summary = run_pipeline(_cfg(inputs, tmp_path / "out", fake_model), llm=peer)
    finally:
        server.close()
    assert summary.reconciliation["balanced"]
    assert sorted(_documents(tmp_path / "out")) == ["inv0.pdf", "inv1.pdf", "inv2.pdf", "inv4.pdf"]
    errors = read_dataset(tmp_path / "out", "errors").to_pylist()
    assert [(e["source_file"], "HTTP 400" in e["message"]) for e in errors] == [("inv3.pdf", True)]


def test_a_server_that_is_not_there_is_a_clear_error(tmp_path: Path, fake_model: Path) -> None:
    with pytest.raises(ServerError, match="127.0.0.1:9/props"):
        LlamaCppServerLLM("http://127.0.0.1:9", fake_model, tokenizer=ByteTokenizer())


def test_the_command_runs_the_pipeline_with_the_server_as_its_engine(server: FakeServer, tmp_path: Path,
                                                                      checkpoints: dict[str, Path]) -> None:
    """`python -m bench.llamacpp_server URL -- <pipeline run arguments>`, as the real workload starts it: the
    run's CLI, its model's tokenizer for the prompts, the server for the answers."""
    from bench.llamacpp_server import main

    inputs = _inputs(tmp_path / "in", n=2)
    out = tmp_path / "out"
    args = ["--input", str(inputs), "--output", str(out), "--model", str(checkpoints["llama"]), "--no-progress"]
    assert main([server.url, "--", *args]) == 0
    assert sorted(_documents(out)) == ["inv0.pdf", "inv1.pdf"] and len(server.bodies) == 2
    assert main([server.url, *args]) == 2  # no "--": usage, nothing run
