"""GGUF checkpoints: weights, greedy tokens, tokenizer and errors against transformers (and llama.cpp if present).

The files are written here with the `gguf` package (tests/helpers/gguf_files.py) from tiny random checkpoints;
transformers reads the same file with its own GGUF loader (dequantization, name mapping, Q/K un-permutation).
"""

from __future__ import annotations

import random

import pytest
import torch

from engine import LLM, SamplingParams
from engine.errors import ModelLoadError
from engine.models.checkpoint import open_checkpoint
from tests.helpers.checkpoints import make_checkpoint
from tests.helpers.gguf_files import write_gguf

pytest.importorskip("gguf")

KINDS = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
SHAPE = dict(hidden_size=256, intermediate_size=512, overrides={"head_dim": 64, "rope_scaling": None})


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf-src")
    return {arch: make_checkpoint(root / arch, arch, **SHAPE) for arch in ("llama", "qwen2")}


@pytest.fixture(scope="module")
def gguf_root(tmp_path_factory):
    return tmp_path_factory.mktemp("gguf")


def _gguf(hf_dirs, root, arch, kind, **kw):
    path = root / f"{arch}-{kind}.gguf"
    if not path.exists():
        write_gguf(hf_dirs[arch], path, kind, **kw)
    return path


def _hf_model(path):
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


def _prompts(n=3, vocab=384):
    rng = random.Random(3)
    return [[0] + [rng.randrange(2, vocab) for _ in range(length)] for length in (4, 17, 40)][:n]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("kind", KINDS)
def test_weights_and_greedy_tokens_match_transformers(hf_dirs, gguf_root, arch, kind):
    path = _gguf(hf_dirs, gguf_root, arch, kind)
    hf = _hf_model(path)
    ours = open_checkpoint(path).tensors()
    ref = hf.state_dict()
    assert set(ours) | {"lm_head.weight"} == set(ref)  # tied head: transformers lists it, GGUF does not store it
    for name, w in ours.items():
        assert torch.equal(w.float(), ref[name]), name
    prompts = _prompts()
    llm = LLM(str(path), dtype="float32", block_size=8, max_num_batched_tokens=32)
    outs = llm.generate(prompts, SamplingParams(max_tokens=12), progress=False)
    with torch.inference_mode():
        refs = [hf.generate(torch.tensor([p]), max_new_tokens=12, do_sample=False, pad_token_id=1)[0, len(p):].tolist()
                for p in prompts]
    assert [o.outputs[0].token_ids for o in outs] == refs


def test_llama_rows_are_unpermuted_to_the_source_checkpoint(hf_dirs, gguf_root):
    """A float32 GGUF holds exactly the source weights, once llama.cpp's Q/K row order is undone."""
    from safetensors.torch import load_file

    src = load_file(str(hf_dirs["llama"] / "model.safetensors"))
    ours = open_checkpoint(_gguf(hf_dirs, gguf_root, "llama", "F32")).tensors()
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight"):
        assert torch.equal(ours[name], src[name])


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_float32_gguf_matches_its_source_directory(hf_dirs, gguf_root, arch):
    prompts = _prompts()
    params = SamplingParams(max_tokens=16)
    a = LLM(str(_gguf(hf_dirs, gguf_root, arch, "F32")), dtype="float32").generate(prompts, params, progress=False)
    b = LLM(str(hf_dirs[arch]), dtype="float32").generate(prompts, params, progress=False)
    assert [o.outputs[0].token_ids for o in a] == [o.outputs[0].token_ids for o in b]


def test_int8_straight_from_gguf_equals_int8_of_the_dequantized_model(hf_dirs, gguf_root, tmp_path):
    """`quantization="int8"` on a GGUF quantizes each projection as it is dequantized; that must be the same int8
    model as quantizing the float checkpoint after loading."""
    path = _gguf(hf_dirs, gguf_root, "llama", "Q8_0")
    a = LLM(str(path), dtype="float32", quantization="int8")
    b = LLM(str(path), dtype="float32")
    from engine.quantization import quantize_model

    quantize_model(b.model, "int8")
    for la, lb in zip(a.model.layers, b.model.layers):
        assert torch.equal(la.qkv_proj.qweight, lb.qkv_proj.qweight)
        assert torch.equal(la.down_proj.scale, lb.down_proj.scale)
    prompts = _prompts()
    params = SamplingParams(max_tokens=12)
    assert ([o.outputs[0].token_ids for o in a.generate(prompts, params, progress=False)]
            == [o.outputs[0].token_ids for o in b.generate(prompts, params, progress=False)])


# ------------------------------------------------------------------ errors

def test_unsupported_architecture_is_named(hf_dirs, tmp_path):
    path = write_gguf(hf_dirs["llama"], tmp_path / "phi.gguf", "F32", arch="phi3")
    with pytest.raises(ModelLoadError, match="unsupported GGUF architecture 'phi3'"):
        open_checkpoint(path)


def test_unsupported_quantization_type_is_named(hf_dirs, tmp_path):
    path = write_gguf(hf_dirs["llama"], tmp_path / "tq2.gguf", "TQ2_0")  # ternary: the gguf package has it, we do not
    with pytest.raises(ModelLoadError, match=r"tensor '[a-z_.0-9]+' has GGML type TQ2_0, not supported; supported: F32"):
        LLM(str(path))


def test_unsupported_pre_tokenizer_is_named(hf_dirs, tmp_path):
    path = write_gguf(hf_dirs["llama"], tmp_path / "pre.gguf", "F32", pre="made-up")
    with pytest.raises(ModelLoadError, match="pre-tokenizer 'made-up' is not supported"):
        open_checkpoint(path)


def test_a_file_that_is_not_gguf(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        LLM(str(bad))
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(b"GGUF\x03\x00\x00\x00\x10")
    with pytest.raises(ModelLoadError, match="not a readable GGUF file"):
        LLM(str(truncated))
    with pytest.raises(ModelLoadError, match="does not exist"):
        LLM(str(tmp_path / "missing.gguf"))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_export_writes_a_directory_transformers_loads_to_the_same_model(hf_dirs, gguf_root, tmp_path, arch):
    import transformers

    from engine import export_hf_checkpoint

    path = _gguf(hf_dirs, gguf_root, arch, "Q4_K")
    out = export_hf_checkpoint(path, tmp_path / "hf")
    exported = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    reference = _hf_model(path).state_dict()
    for name, w in exported.state_dict().items():
        assert torch.equal(w, reference[name]), name
    prompts = _prompts()
    ours = LLM(str(path), dtype="float32").generate(prompts, SamplingParams(max_tokens=12), progress=False)
    again = LLM(str(out), dtype="float32").generate(prompts, SamplingParams(max_tokens=12), progress=False)
    assert [o.outputs[0].token_ids for o in ours] == [o.outputs[0].token_ids for o in again]
    with pytest.raises(FileExistsError):
        export_hf_checkpoint(path, out)


def test_mistral_checkpoint_converted_as_llama_matches(tmp_path):
    """llama.cpp writes Mistral 7B-style models with the "llama" architecture (one KV head here)."""
    src = make_checkpoint(tmp_path / "mistral", "mistral", **SHAPE)
    path = write_gguf(src, tmp_path / "mistral-Q8_0.gguf", "Q8_0")
    prompts = _prompts()
    outs = LLM(str(path), dtype="float32").generate(prompts, SamplingParams(max_tokens=12), progress=False)
    hf = _hf_model(path)
    with torch.inference_mode():
        refs = [hf.generate(torch.tensor([p]), max_new_tokens=12, do_sample=False, pad_token_id=1)[0, len(p):].tolist()
                for p in prompts]
    assert [o.outputs[0].token_ids for o in outs] == refs


def _resident_kib(path) -> int:
    """This process's resident KiB of the mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                inside = line.rstrip().endswith(str(path))
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_building_the_weights_leaves_no_page_of_the_file_resident(hf_dirs, tmp_path):
    """The parsed file stays cached (for the tokenizer and a later load), but once every tensor is built its
    mapped pages leave the resident set: a real Q4_1 file is ~90 MB of a run's peak otherwise."""
    path = write_gguf(hf_dirs["llama"], tmp_path / "pages-Q8_0.gguf", "Q8_0")
    ckpt = open_checkpoint(path)
    weights = ckpt.tensors()
    assert weights and _resident_kib(path) == 0
    again = open_checkpoint(path).tensors()  # the pages come back from the file when read again
    assert all(torch.equal(weights[k], again[k]) for k in weights)


def test_the_cached_parse_keeps_none_of_the_readers_field_records(hf_dirs, tmp_path):
    """The parse stays cached for the life of the process; the `gguf` reader's field records (every array
    element of the tokenizer's key/values as its own numpy views) must not: 50 MiB on a 49k-token vocabulary."""
    import gc

    from gguf.gguf_reader import ReaderField

    from engine.models.gguf.reader import read_gguf

    path = write_gguf(hf_dirs["llama"], tmp_path / "fields-F32.gguf", "F32")
    parsed = read_gguf(path)
    gc.collect()
    assert parsed.tensors and not any(isinstance(o, ReaderField) for o in gc.get_objects())
