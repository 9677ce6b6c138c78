"""A throughput-tuned offline LLM engine: continuous batching over a paged KV cache.

Public API, shaped as vLLM's offline one: `LLM`, `SamplingParams`, `RequestOutput` (with `outputs`:
`CompletionOutput`s, `Logprob`s); `load_tokenizer` and `export_hf_checkpoint` for checkpoints
(Hugging Face directories or GGUF files); `EngineConfig`/`EngineSettings` (every engine setting, one default each)
with `add_engine_args`/`engine_overrides` for command lines; `configure_cpu_threads` for programs that run it on
CPU, and `return_freed_memory` for those that go on after dropping an engine. The engine knows nothing about
documents or orchestration.
"""

from engine.cpu_runtime import configure_cpu_threads, return_freed_memory

# Importing the engine changes nothing in the process: a program that runs it on CPU calls
# `configure_cpu_threads()` before anything imports torch (the `pipeline` CLI does) for the OpenMP waiting default.
# The public names load on first use (PEP 562), so `import engine` costs no torch import in processes that never
# run a model, e.g. ingest workers.
_API = {
    "EngineError": "engine.errors", "ModelLoadError": "engine.errors", "MemoryLimitError": "engine.errors",
    "LLM": "engine.llm",
    "export_hf_checkpoint": "engine.models.export", "load_tokenizer": "engine.models.export",
    "RequestMetrics": "engine.outputs", "RequestOutput": "engine.outputs", "CompletionOutput": "engine.outputs",
    "Logprob": "engine.outputs",
    "quantize_checkpoint": "engine.quantization", "SamplingParams": "engine.sampling_params",
    "SpeculativeConfig": "engine.speculative.config", "EngineConfig": "engine.config",
    "EngineSettings": "engine.config", "add_engine_args": "engine.args", "engine_overrides": "engine.args",
}

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "RequestMetrics", "EngineError",
           "ModelLoadError", "MemoryLimitError", "quantize_checkpoint",
           "load_tokenizer", "export_hf_checkpoint", "SpeculativeConfig", "EngineConfig", "EngineSettings",
           "configure_cpu_threads", "return_freed_memory", "add_engine_args", "engine_overrides"]


def __getattr__(name: str) -> object:
    if name in _API:
        # lazy: the public names load on first use (PEP 562): importing engine stays light
        import importlib

        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
