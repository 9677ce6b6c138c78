"""llama.cpp's HTTP server as the peer engine of the real workload: the same pipeline run, the same prompts and the
same JSON schemas, only the engine swapped.

`LlamaCppServerLLM` answers the part of the engine's `LLM` API a pipeline run uses (`generate_stream`, `generate`,
`tokenizer`, `max_model_len`, `config_summary`, `stats`) by posting each request's prompt token ids, its JSON
schema (which llama-server turns into a grammar) and its token budget to a running `llama-server`, with as many
requests in flight as the server has slots. Everything around inference (ingest, OCR, candidates, grounding,
validation, the sink) is the pipeline's own, so the fields right are comparable with the engine's run.

    python -m bench.llamacpp_server http://127.0.0.1:8080 -- --input DIR --output OUT   # a `pipeline run`

`merged_gguf` makes the GGUF the server loads: the model the engine runs (a LoRA adapter merged into its base,
`engine.export_hf_checkpoint`) converted with llama.cpp's own converter (then quantized by
`bench.llamacpp.peer_ggufs`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from bench.peer_engine import PeerEngine, run_pipeline_with, split_args
from engine import CompletionOutput, Logprob, RequestMetrics, RequestOutput

SERVER = "llama-server"
REQUEST_TIMEOUT_S = 900.0  # one request, queue wait included: a bucket's last request waits for the others


class ServerError(RuntimeError):
    """The server could not be reached or refused a request."""


def _http(url: str, body: dict[str, Any] | None = None, timeout: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # the server's own message (a schema it cannot compile, a prompt too long)
        detail = exc.read().decode(errors="replace")[:300]
        raise ServerError(f"{url}: HTTP {exc.code}: {detail}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ServerError(f"{url}: {exc}") from exc


class LlamaCppServerLLM(PeerEngine):
    """A running llama-server, driven like the engine. `model` is the model the pipeline names (for its tokenizer,
    which must be the one the server's GGUF was made from: the prompts travel as token ids)."""

    def __init__(self, url: str, model: str | Path, tokenizer: Any = None) -> None:
        self.url = url.rstrip("/")
        if tokenizer is None:
            # lazy: the engine's tokenizer reader loads only for a run that uses the peer
            from engine import load_tokenizer
            from engine.registry import model_parts

            tokenizer = load_tokenizer(model_parts(model)[0])
        self.tokenizer = tokenizer
        self.model = str(model)
        props = _http(f"{self.url}/props", timeout=30)
        self.slots = max(1, int(props.get("total_slots") or 1))
        self.max_model_len = int((props.get("default_generation_settings") or {}).get("n_ctx") or 0)
        if self.max_model_len <= 0:
            raise ServerError(f"{self.url}/props names no context size per slot")
        self.server_model = str(props.get("model_path") or "")
        self._lock = threading.Lock()
        self._stats = {"requests": 0, "prompt_tokens": 0, "prefill_tokens_computed": 0, "cached_tokens": 0,
                       "output_tokens": 0, "generate_s": 0.0, "server_prompt_ms": 0.0, "server_predict_ms": 0.0}

    def config_summary(self) -> dict[str, Any]:
        return {"engine": "llama.cpp server", "url": self.url, "server_model": self.server_model,
                "model_dir": self.model, "slots": self.slots, "max_model_len": self.max_model_len,
                "device": "cpu", "dtype": re.split(r"[.-]", Path(self.server_model).stem)[-1]}  # "m.Q8_0" -> "Q8_0"

    def stats(self) -> dict[str, Any]:
        s = dict(self._stats)
        s["prefix_cache_hit_rate"] = s["cached_tokens"] / s["prompt_tokens"] if s["prompt_tokens"] else 0.0
        return s

    def _body(self, prompt: Sequence[int], params: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"prompt": list(prompt), "n_predict": int(params.max_tokens),
                                "temperature": float(params.temperature or 0.0), "cache_prompt": True,
                                "return_tokens": True, "stream": False}
        if not params.temperature:  # greedy, as a pipeline run asks
            body["top_k"] = 1
        if getattr(params, "json_schema", None) is not None:
            body["json_schema"] = params.json_schema
        if getattr(params, "logprobs", None) is not None:  # the engine reports each emitted token's own
            body["n_probs"] = max(1, int(params.logprobs))
        return body

    def _one(self, index: int, prompt: Sequence[int], params: Any) -> RequestOutput:
        metrics = RequestMetrics(arrival_time=time.monotonic(), num_prompt_tokens=len(prompt))
        try:
            res = _http(f"{self.url}/completion", self._body(prompt, params))
        except ServerError as exc:
            metrics.finish_time = time.monotonic()
            return RequestOutput(index=index, prompt_token_ids=list(prompt), error=str(exc), metrics=metrics,
                                 outputs=[CompletionOutput(index=0, text="", token_ids=[], finish_reason="error")])
        metrics.finish_time = time.monotonic()
        timings = res.get("timings") or {}
        tokens = [int(t) for t in res.get("tokens") or []]
        metrics.num_output_tokens = len(tokens)
        metrics.num_cached_tokens = int(timings.get("cache_n") or 0)
        # the server reports how long its generation ran; the first token came that long before the end
        metrics.first_token_time = metrics.finish_time - float(timings.get("predicted_ms") or 0.0) / 1000
        logprobs = None
        if "completion_probabilities" in res:
            logprobs = [{int(p["id"]): Logprob(float(p["logprob"]), None, p.get("token"))}
                        for p in res["completion_probabilities"]]
        stop = res.get("stop_type")
        finish = "length" if stop == "limit" or res.get("truncated") else "stop"
        with self._lock:  # requests finish on the pool's threads
            s = self._stats
            s["requests"] += 1
            s["prompt_tokens"] += len(prompt)
            s["prefill_tokens_computed"] += int(timings.get("prompt_n") or 0)
            s["cached_tokens"] += metrics.num_cached_tokens
            s["output_tokens"] += len(tokens)
            s["server_prompt_ms"] += float(timings.get("prompt_ms") or 0.0)
            s["server_predict_ms"] += float(timings.get("predicted_ms") or 0.0)
        return RequestOutput(index=index, prompt_token_ids=list(prompt), error=None, metrics=metrics,
                             outputs=[CompletionOutput(index=0, text=str(res.get("content") or ""), token_ids=tokens,
                                                       finish_reason=finish, logprobs=logprobs)])

    def generate_stream(self, prompts: Sequence[Sequence[int]], params: Any, progress: bool = False
                        ) -> Iterator[RequestOutput]:
        """Each request's output as the server finishes it (completion order; `output.index` maps back), with at
        most one request per server slot in flight, so the server batches them and none waits in its queue."""
        del progress  # the pipeline reports progress itself
        plist = list(params) if isinstance(params, Sequence) else [params] * len(prompts)
        if any(isinstance(p, str) for p in prompts):
            raise TypeError("the llama.cpp peer takes prompts as token ids, as a pipeline run passes them")
        t0 = time.perf_counter()
        todo = list(enumerate(prompts))[::-1]
        try:
            with ThreadPoolExecutor(max_workers=self.slots) as pool:
                running: set[Future[RequestOutput]] = set()
                while todo or running:
                    while todo and len(running) < self.slots:
                        i, prompt = todo.pop()
                        running.add(pool.submit(self._one, i, prompt, plist[i]))
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for fut in done:
                        yield fut.result()
        finally:
            self._stats["generate_s"] += time.perf_counter() - t0


def start_server(binary: Path, gguf: Path, parallel: int, ctx_per_slot: int, threads: int, port: int,
                 log: Path, timeout_s: float = 300.0) -> subprocess.Popen[bytes]:
    """`llama-server` on 127.0.0.1:port with `parallel` slots of `ctx_per_slot` tokens each (continuous batching,
    the prompt cache on), started and healthy; the caller stops it."""
    cmd = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-np", str(parallel),
           "-c", str(parallel * ctx_per_slot), "-t", str(threads), "-tb", str(threads), "--no-webui"]
    fh = open(log, "w", encoding="utf-8")  # noqa: SIM115 - the server writes to it for as long as it runs
    fh.write(" ".join(cmd) + "\n")
    fh.flush()
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"{SERVER} exited with status {proc.returncode} (see {log})")
        try:
            if _http(f"http://127.0.0.1:{port}/health", timeout=5).get("status") == "ok":
                return proc
        except ServerError:
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise ServerError(f"{SERVER} not healthy after {timeout_s:.0f} s (see {log})")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def convert_script(bin_dir: Path) -> Path | None:
    """llama.cpp's `convert_hf_to_gguf.py` in the source tree scripts/build_llamacpp.sh unpacked beside its bin."""
    found = sorted(Path(bin_dir).parent.glob("src/llama_cpp_python-*/vendor/llama.cpp/convert_hf_to_gguf.py"))
    return found[-1] if found else None


def merged_gguf(model: str | Path, out_dir: Path, bin_dir: Path) -> Path:
    """The model the engine runs (an adapter merged into its base) as a float32 GGUF, made once under out_dir with
    llama.cpp's converter; `bench.llamacpp.peer_ggufs` quantizes it to the peer's formats."""
    # lazy: the engine's exporter and registry load only when a peer GGUF is made
    from engine import export_hf_checkpoint
    from engine.registry import model_parts

    base, adapter = model_parts(model)
    stem = Path(model).name
    target = out_dir / f"{stem}.gguf"  # float32; peer_ggufs names its quantized copies <stem>.<format>.gguf
    if target.is_file():
        return target
    script = convert_script(bin_dir)
    if script is None:
        raise FileNotFoundError(f"convert_hf_to_gguf.py not found beside {bin_dir} (bash scripts/build_llamacpp.sh)")
    out_dir.mkdir(parents=True, exist_ok=True)
    hf = export_hf_checkpoint(base, out_dir / f"{stem}-hf", adapter=adapter)
    subprocess.run([sys.executable, str(script), str(hf), "--outtype", "f32", "--outfile", str(target)],
                   check=True, capture_output=True)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.llamacpp_server URL -- <pipeline run arguments>`: a pipeline run whose engine is the server."""
    split = split_args(sys.argv[1:] if argv is None else argv, "python -m bench.llamacpp_server URL -- <run arguments>")
    if split is None or len(split[0]) != 1:
        return 2
    (url,), run_args = split
    return run_pipeline_with(lambda model, **_engine_kwargs: LlamaCppServerLLM(url, model), run_args)


if __name__ == "__main__":
    raise SystemExit(main())
