"""GGUF checkpoints (llama.cpp's single-file format), read with the `gguf` package.

    read_gguf(path) -> GGUFFile          metadata as plain values, tensors left memory-mapped
    gguf_model_config(file) -> ModelConfig
    gguf_tensors(file, cfg, int8=False)  Hugging Face-named torch tensors, dequantized (and Q/K un-permuted)
    gguf_tokenizer(file) -> Tokenizer    vocabulary, merges, special tokens and chat template from the metadata
"""

from engine.models.gguf.config import gguf_model_config
from engine.models.gguf.reader import GGUFFile, is_gguf, read_gguf
from engine.models.gguf.tensors import SUPPORTED_QUANT_TYPES, gguf_tensors
from engine.models.gguf.tokenizer import gguf_tokenizer

__all__ = ["GGUFFile", "SUPPORTED_QUANT_TYPES", "gguf_model_config", "gguf_tensors", "gguf_tokenizer", "is_gguf",
           "read_gguf"]
