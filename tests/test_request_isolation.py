"""A problem confined to one request ends that request alone, with finish_reason="error" and a reason; the other
requests of the batch produce exactly what they produce without it."""

from __future__ import annotations

import random

import pytest
import torch

from engine import LLM, SamplingParams

GOOD = SamplingParams(max_tokens=6, min_tokens=6, ignore_eos=True)


def _prompts(n: int = 3) -> list[list[int]]:
    rng = random.Random(5)
    return [[0] + [rng.randrange(2, 384) for _ in range(rng.randrange(5, 30))] for _ in range(n)]


@pytest.fixture(scope="module")
def llm(checkpoints):
    return LLM(checkpoints["llama"], dtype="float32", block_size=8)


@pytest.fixture(scope="module")
def alone(llm):
    return [llm.generate([p], GOOD, progress=False)[0].outputs[0].token_ids for p in _prompts()]


def _check_isolated(outs, alone, bad: int, reason: str) -> None:
    assert outs[bad].outputs[0].finish_reason == "error" and reason in (outs[bad].error or ""), outs[bad].error
    for i, out in enumerate(outs):
        if i != bad:
            assert out.outputs[0].finish_reason == "length" and out.outputs[0].token_ids == alone[i]


def test_out_of_range_stop_token_ids_fail_their_request(llm, alone):
    params = [GOOD, SamplingParams(max_tokens=6, min_tokens=3, stop_token_ids=[10**6]), GOOD]
    _check_isolated(llm.generate(_prompts(), params, progress=False), alone, 1, "outside the vocabulary")


def test_schema_that_does_not_compile_fails_its_request(llm, alone):
    broken = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
    params = [GOOD, GOOD, SamplingParams(max_tokens=6, json_schema=broken)]
    _check_isolated(llm.generate(_prompts(), params, progress=False), alone, 2, "JSON schema")


def test_non_finite_logits_fail_their_request(llm, alone, monkeypatch):
    runner = llm._core.runner
    prepare, execute = runner.prepare, runner.execute
    seen = {}

    def spy_prepare(batch):
        inputs = prepare(batch)
        seen["inputs"] = inputs
        return inputs

    def poisoned_execute(inputs):
        logits = execute(inputs)
        row = 0
        for seq, count in zip(inputs.sampling_seqs, inputs.sample_counts):
            if seq.index == 0 and seq.num_output_tokens == 2:
                logits[row, 7] = float("nan")
            row += count
        return logits

    monkeypatch.setattr(runner, "prepare", spy_prepare)
    monkeypatch.setattr(runner, "execute", poisoned_execute)
    outs = llm.generate(_prompts(), GOOD, progress=False)
    _check_isolated(outs, alone, 0, "non-finite logits")
    assert len(outs[0].outputs[0].token_ids) == 2  # what it produced before the bad step is kept


def test_tiny_temperature_is_the_greedy_limit_not_an_overflow(llm, alone):
    """logits / 1e-40 overflows float32 to inf (softmax NaN, multinomial raised for the whole batch); scaled after
    subtracting the row max it is the greedy limit."""
    params = [GOOD, SamplingParams(max_tokens=6, min_tokens=6, ignore_eos=True, temperature=1e-40), GOOD]
    outs = llm.generate(_prompts(), params, progress=False)
    assert [o.outputs[0].finish_reason for o in outs] == ["length"] * 3
    assert [o.outputs[0].token_ids for o in outs] == alone


def test_default_seed_follows_the_request_not_its_position(llm):
    """Without an explicit seed, a sampled request draws the same tokens wherever it stands in the call."""
    prompts = _prompts()
    params = SamplingParams(max_tokens=8, temperature=1.0, ignore_eos=True, min_tokens=8)
    forward = llm.generate(prompts, params, progress=False)
    backward = llm.generate(prompts[::-1], params, progress=False)[::-1]
    alone = [llm.generate([p], params, progress=False)[0] for p in prompts]
    assert [o.outputs[0].token_ids for o in forward] == [o.outputs[0].token_ids for o in backward] == [o.outputs[0].token_ids for o in alone]
    # ...and different requests still draw differently seeded streams.
    assert len({tuple(o.outputs[0].token_ids) for o in forward}) == len(prompts)


def test_native_decode_rejects_block_ids_outside_the_pool():
    from kernels.cpu import native_ops

    ops = native_ops()
    if ops is None:
        pytest.skip("the native CPU kernels did not build here")
    q = torch.randn(1, 4, 16)
    cache = torch.zeros(2, 4 * 8, 16)  # 4 blocks of 8 slots
    out = torch.empty_like(q)
    for block in (4, -1):
        with pytest.raises(RuntimeError, match="block"):
            ops.paged_decode_attention(q, cache, cache, torch.tensor([[block]]), torch.tensor([3]), 8, 0.25, 0, out)


def test_a_broken_schema_costs_one_pipeline_row_not_its_bucket(monkeypatch):
    """Before, a schema that failed to compile raised out of `generate_stream` and turned every item of the
    bucket into an EngineError row; now only its own item becomes an error row."""
    from pathlib import Path

    import pipeline.infer.in_process as run
    from pipeline.plan.bucketing import prepare_requests
    from pipeline.plan.work import WorkUnit

    model = Path(__file__).resolve().parents[1] / "data" / "models" / "finextract-3m"
    llm = LLM(model, dtype="float32")
    texts = ["Invoice INV-7 from Acme GmbH dated 2024-03-05, total EUR 120.00.",
             "Invoice INV-8 from Beta BV dated 2024-04-01, total EUR 75.50.",
             "KYC notice: provide a passport before 2025-01-31."]
    units = [WorkUnit(row_id=f"d{i}", kind="document", source_files=[f"{i}.pdf"], text=t) for i, t in enumerate(texts)]
    prep = prepare_requests(units, llm.tokenizer, 512, {"document": 160, "window": 160})
    assert len(prep.buckets) == 1
    make_params = run._params

    def params_with_one_broken(kind, max_tokens, document_text=None):
        p = make_params(kind, max_tokens, document_text)
        if document_text is not None and "Beta BV" in document_text:
            p.json_schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
        return p

    monkeypatch.setattr(run, "_params", params_with_one_broken)
    (res,) = list(run.infer(llm, prep.buckets, run_fields={}))
    assert [e.row_id for e in res.errors] == ["d1"], [(e.row_id, e.message) for e in res.errors]
    assert "JSON schema" in res.errors[0].message
    assert sorted(r["row_id"] for r in res.rows) == ["d0", "d2"]


def test_an_item_whose_answer_cannot_be_collected_is_an_error_row_not_lost(monkeypatch):
    """Before, an item was taken off the pending list before its answer was collected: a failure while collecting
    (here the row builder) left that item neither a row nor an error row, and the run unbalanced."""
    from pathlib import Path

    import pipeline.infer.in_process as run
    from pipeline.plan.bucketing import prepare_requests
    from pipeline.plan.work import WorkUnit

    model = Path(__file__).resolve().parents[1] / "data" / "models" / "finextract-3m"
    llm = LLM(model, dtype="float32")
    units = [WorkUnit(row_id=f"d{i}", kind="document", source_files=[f"{i}.pdf"], text=t)
             for i, t in enumerate(["Invoice INV-7 from Acme GmbH, total EUR 120.00.", "Receipt 8, total EUR 7.50."])]
    prep = prepare_requests(units, llm.tokenizer, 512, {"document": 160, "window": 160})
    make_row = run.output_row

    def failing_for_d1(item, *args, **kwargs):
        if item.unit.row_id == "d1":
            raise KeyError("a field the row builder expected")
        return make_row(item, *args, **kwargs)

    monkeypatch.setattr(run, "output_row", failing_for_d1)
    results = list(run.infer(llm, prep.buckets, run_fields={}))
    rows = [r["row_id"] for res in results for r in res.rows]
    errors = [(e.row_id, e.error_class) for res in results for e in res.errors]
    assert sorted(rows + [rid for rid, _ in errors]) == ["d0", "d1"]
    assert ("d1", "EngineError") in errors


def test_buckets_flow_through_one_continuous_stream_with_the_answers_each_bucket_alone_gets():
    """Before, each bucket ran to its end before the next started (the batch shrank to the bucket's longest answer);
    now the engine reads the next bucket's requests as it has room, and every answer is the one a bucket run alone
    gets (greedy, float32)."""
    from pathlib import Path

    import pipeline.infer.in_process as run
    from pipeline.plan.bucketing import prepare_requests
    from pipeline.plan.work import WorkUnit

    model = Path(__file__).resolve().parents[1] / "data" / "models" / "finextract-3m"
    llm = LLM(model, dtype="float32", max_num_seqs=2)
    texts = [f"Invoice INV-{i} from Acme {i} GmbH, total EUR {i}0.00." + " Thanks." * i for i in range(6)]
    units = [WorkUnit(row_id=f"d{i}", kind="document", source_files=[f"{i}.pdf"], text=t) for i, t in enumerate(texts)]
    prep = prepare_requests(units, llm.tokenizer, 512, {"document": 160, "window": 160}, bucket_size=2)
    assert len(prep.buckets) == 3
    events: list[tuple[str, int]] = []
    stream = llm.stream

    def watched(requests, *args, **kwargs):
        def reading():
            for k, req in enumerate(requests):
                events.append(("read", k))
                yield req
        for out in stream(reading(), *args, **kwargs):
            events.append(("out", out.index))
            yield out

    llm.stream = watched  # type: ignore[method-assign]
    together = {res.bucket_id: res for res in run.infer(llm, prep.buckets, run_fields={})}
    assert ("read", 2) in events, "the buckets did not go through one stream"
    # the second bucket's first request was read while the first bucket's answers were still decoding
    assert events.index(("read", 2)) < max(events.index(("out", 0)), events.index(("out", 1)))
    del llm.stream

    def answers(res: run.BucketResult) -> list[tuple]:
        return sorted([(r["row_id"], r["issuer"], r["reference"], r["amount"]) for r in res.rows]
                      + [(e.row_id, e.error_class, e.message) for e in res.errors])

    for bucket in prep.buckets:
        (alone,) = run.infer(llm, [bucket], run_fields={})
        assert answers(together[bucket.bucket_id]) == answers(alone) and len(answers(alone)) == 2
