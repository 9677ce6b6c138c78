"""Engine exceptions: each names the file, field or value at fault."""


class EngineError(Exception):
    """Base class for errors raised by the engine."""


class ModelLoadError(EngineError):
    """The model directory is missing, incomplete or holds something we cannot run."""


class MemoryLimitError(EngineError, ValueError):
    """`memory_limit` leaves no room for the KV cache after the loaded model and its steps (both figures said)."""
