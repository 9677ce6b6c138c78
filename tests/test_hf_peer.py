"""The real workload's naive baseline (bench/hf_peer.py): HF `generate` in left-padded batches of 4, its JSON
schemas enforced by the engine's grammar as a logits processor, answers the engine's own tokens in float32, so the
baseline differs from the engine in speed, not in what it returns."""

from __future__ import annotations

import json
from pathlib import Path

from bench.hf_peer import HFGenerateLLM
from engine import LLM, SamplingParams

PROMPTS = [[1, 5, 9, 33, 70], [1, 200, 13, 7, 7, 7, 91, 12], [1, 44], [1, 3, 3, 3, 3, 3], [1, 8, 100]]
SCHEMA = {"type": "object", "properties": {"kind": {"enum": ["invoice", "receipt"]}, "flag": {"type": "boolean"}},
          "required": ["kind", "flag"]}


def test_hf_generate_b4_answers_the_engines_tokens_under_the_same_schema(checkpoints: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    base = checkpoints["llama"]
    hf = HFGenerateLLM(base, tmp_path, dtype="float32")
    params = [SamplingParams(max_tokens=32, temperature=0.0, json_schema=SCHEMA if i % 2 == 0 else None)
              for i in range(len(PROMPTS))]  # five: a batch of four and one of one, constrained and free rows mixed
    got = hf.generate(PROMPTS, params)
    want = LLM(str(base), dtype="float32").generate(PROMPTS, params, progress=False)
    assert [o.index for o in got] == list(range(len(PROMPTS)))
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in want]
    assert [o.outputs[0].finish_reason for o in got] == [o.outputs[0].finish_reason for o in want]
    for i in (0, 2, 4):  # the constrained rows are the schema's JSON
        assert json.loads(got[i].outputs[0].text)["kind"] in ("invoice", "receipt")
    assert hf.stats()["requests"] == len(PROMPTS) and hf.config_summary()["batch_size"] == 4


def test_the_command_without_its_separator_is_a_usage_error() -> None:
    from bench.hf_peer import main

    assert main(["--dtype", "float32", "--input", "x"]) == 2
