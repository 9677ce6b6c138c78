"""A throughput-tuned offline LLM engine: continuous batching over a paged KV cache.

Public API: `LLM`, `SamplingParams`, `RequestOutput`. The engine knows nothing about documents or orchestration.
"""

from engine.errors import EngineError, ModelLoadError
from engine.llm import LLM
from engine.outputs import RequestMetrics, RequestOutput
from engine.sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "RequestOutput", "RequestMetrics", "EngineError", "ModelLoadError"]
