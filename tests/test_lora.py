"""LoRA adapters merged at load: the engine with `adapter=` produces exactly the tokens of transformers running the
peft-merged model in float32, and a malformed adapter is a clear load error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from engine import LLM, SamplingParams
from engine.errors import ModelLoadError
from tests.helpers.checkpoints import make_checkpoint
from tests.helpers.hf_reference import hf_greedy

PROMPTS = [[1, 5, 9, 33, 70], [1, 200, 13, 7, 7, 7, 91, 12], [1, 44]]


@pytest.fixture(scope="module")
def adapted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("lora")
    base = make_checkpoint(root / "base", "llama", seed=3)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, layers_to_transform=[1],
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    peft_model = get_peft_model(model, cfg)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero (a no-op adapter); make it change the outputs
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    peft_model.save_pretrained(root / "adapter")
    merged = root / "merged"
    peft_model.merge_and_unload().save_pretrained(merged)
    for f in base.iterdir():
        if f.name.startswith("tokenizer") or f.name == "special_tokens_map.json":
            shutil.copy(f, merged / f.name)
    return {"base": base, "adapter": root / "adapter", "merged": merged}


def _greedy(llm: LLM, n: int = 12) -> list[list[int]]:
    params = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)
    return [o.outputs[0].token_ids for o in llm.generate(PROMPTS, params, progress=False)]


def test_adapter_merge_matches_peft_merged_model_exactly(adapted: dict[str, Path]) -> None:
    llm = LLM(str(adapted["base"]), dtype="float32", adapter=str(adapted["adapter"]))
    got = _greedy(llm)
    assert got == [hf_greedy(adapted["merged"], p, 12, ignore_eos=True) for p in PROMPTS]
    base = _greedy(LLM(str(adapted["base"]), dtype="float32"))
    assert got != base, "the adapter must change the outputs, or this test proves nothing"
    summary = llm.config_summary()
    assert summary["adapter"] == str(adapted["adapter"]) and len(summary["adapter_sha256"]) == 64


def test_adapter_with_int8_quantizes_the_merged_weights(adapted: dict[str, Path]) -> None:
    llm = LLM(str(adapted["base"]), dtype="float32", adapter=str(adapted["adapter"]), quantization="int8")
    assert len(_greedy(llm)[0]) == 12


def test_export_merges_the_adapter_into_the_weights_another_tool_loads(adapted: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    """The exported directory holds the weights the engine runs with the adapter (peft's merged model's), so a peer
    such as llama.cpp, converting that directory, runs the same model."""
    from safetensors.torch import load_file

    from engine import export_hf_checkpoint

    out = export_hf_checkpoint(adapted["base"], tmp_path / "hf", adapter=adapted["adapter"])
    exported = load_file(str(out / "model.safetensors"))
    merged = load_file(str(adapted["merged"] / "model.safetensors"))
    base = load_file(str(adapted["base"] / "model.safetensors"))
    changed = [n for n in merged if not torch.equal(merged[n], base[n])]
    assert changed, "the adapter must change some weights, or this test proves nothing"
    for name, w in merged.items():
        torch.testing.assert_close(exported[name], w, rtol=0, atol=1e-6, msg=name)
    direct = LLM(str(adapted["base"]), dtype="float32", adapter=str(adapted["adapter"]))
    assert _greedy(LLM(str(out), dtype="float32")) == _greedy(direct)
    with pytest.raises(ModelLoadError, match="not a LoRA adapter"):
        export_hf_checkpoint(adapted["base"], tmp_path / "none", adapter=tmp_path / "missing")
    assert not (tmp_path / "none").exists()


def test_malformed_adapters_are_clear_errors(adapted: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a LoRA adapter"):
        LLM(str(adapted["base"]), adapter=str(tmp_path))
    bad = tmp_path / "bad"
    shutil.copytree(adapted["adapter"], bad)
    cfg = json.loads((bad / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps({**cfg, "use_dora": True}))
    with pytest.raises(ModelLoadError, match="plain LoRA"):
        LLM(str(adapted["base"]), adapter=str(bad))
    from safetensors.torch import load_file, save_file

    other = tmp_path / "other"
    shutil.copytree(adapted["adapter"], other)
    tensors = load_file(str(other / "adapter_model.safetensors"))
    save_file({k.replace("layers.1.", "layers.7."): v for k, v in tensors.items()},
              str(other / "adapter_model.safetensors"))
    with pytest.raises(ModelLoadError, match="does not have"):
        LLM(str(adapted["base"]), adapter=str(other))


def test_pipeline_loads_an_adapter_directory_as_a_model(adapted: dict[str, Path], tmp_path: Path) -> None:
    """An adapter directory whose adapter_config.json names its base is a model spec for run and eval; its identity
    names both, so rows of the base and of the adapted model never collide."""
    from pipeline.models import load_llm, model_identity, model_parts, resolve_model

    spec = tmp_path / "my-adapter"
    shutil.copytree(adapted["adapter"], spec)
    cfg = json.loads((spec / "adapter_config.json").read_text())
    (spec / "adapter_config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": str(adapted["base"])}))
    assert resolve_model(str(spec)) == spec
    assert model_parts(spec) == (adapted["base"], spec)
    ident = model_identity(spec)
    assert ident.startswith("my-adapter@") and ident.endswith(model_identity(adapted["base"]))
    llm = load_llm(spec, dtype="float32")
    direct = LLM(str(adapted["base"]), dtype="float32", adapter=str(adapted["adapter"]))
    assert _greedy(llm) == _greedy(direct)
    (spec / "adapter_config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": None}))
    with pytest.raises(FileNotFoundError, match="does not name its base"):
        model_parts(spec)


def test_finextract_smollm2_resolves_to_the_shipped_adapter_over_its_base() -> None:
    from pipeline.models import ADAPTERS, model_parts, resolve_model

    adapter = ADAPTERS["finextract-smollm2"]
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    size = (adapter / "adapter_model.safetensors").stat().st_size
    assert size <= 25 * 1024 * 1024
    try:
        base = resolve_model("smollm2-135m-instruct")
    except FileNotFoundError:
        pytest.skip("the SmolLM2 base is not installed (scripts/setup.sh installs it)")
    assert resolve_model("finextract-smollm2") == adapter and model_parts(adapter) == (base, adapter)
