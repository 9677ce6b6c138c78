"""A throughput-tuned offline LLM engine: continuous batching over a paged KV cache.

Public API: `LLM`, `SamplingParams`, `RequestOutput`; `load_tokenizer` and `export_hf_checkpoint` for checkpoints
(Hugging Face directories or GGUF files). The engine knows nothing about documents or orchestration.
"""

from engine.cpu_runtime import configure_cpu_threads

configure_cpu_threads()

from engine.errors import EngineError, ModelLoadError  # noqa: E402
from engine.llm import LLM  # noqa: E402
from engine.models.export import export_hf_checkpoint, load_tokenizer  # noqa: E402
from engine.outputs import RequestMetrics, RequestOutput  # noqa: E402
from engine.quantization import quantize_checkpoint  # noqa: E402
from engine.sampling_params import SamplingParams  # noqa: E402

__all__ = ["LLM", "SamplingParams", "RequestOutput", "RequestMetrics", "EngineError", "ModelLoadError", "quantize_checkpoint",
           "load_tokenizer", "export_hf_checkpoint"]
