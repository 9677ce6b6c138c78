"""Model definitions and the Hugging Face checkpoint loader."""

from engine.models.config import ModelConfig, load_model_config
from engine.models.llama import LlamaModel
from engine.models.loader import load_model

__all__ = ["ModelConfig", "load_model_config", "LlamaModel", "load_model"]
