"""Shared fixtures: tiny random checkpoints per architecture, built once per session in a temp dir."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # tests may share a busy CI box: never spin (engine/cpu_runtime.py)

import pytest  # noqa: E402
import torch  # noqa: E402

from pathlib import Path  # noqa: E402

from tests.helpers.checkpoints import make_checkpoint  # noqa: E402

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("ckpt")
    return {
        "llama": make_checkpoint(root / "llama", "llama"),
        "mistral": make_checkpoint(root / "mistral", "mistral", shard=True),
        "qwen2": make_checkpoint(root / "qwen2", "qwen2"),
    }


@pytest.fixture()
def fake_model(tmp_path: Path) -> Path:
    """A model directory for runs that pass a FakeLLM: it only has to exist and hold a config.json."""
    d = tmp_path / "fake-model"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d
