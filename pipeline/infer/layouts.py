"""The engine reads a bank export's columns where detection could not: which column is the date, the amount
(or debit and credit), the currency, the counterparty, the description and the balance, and how dates and
amounts are written. Decoding is constrained to the column labels the file has; the answer then becomes a bank
profile only if the file's own values bear it out (`pipeline.ingest.layout_question.answer_profile`)."""

from __future__ import annotations

import json
from typing import Any

from engine import SamplingParams
from pipeline.ingest.layout_question import LayoutQuestion, answer_profile, shown_table
from pipeline.ingest.profiles import BankProfile
from pipeline.plan.prompts import encode_prompt

MAX_ANSWER_TOKENS = 160


def layout_schema(question: LayoutQuestion) -> dict[str, Any]:
    """Each open field takes one of the options the file's values allow (`LayoutQuestion.asked`)."""
    asked = question.asked()
    return {"type": "object", "properties": {f: {"enum": list(o)} for f, o in asked.items()},
            "required": list(asked), "additionalProperties": False}


def ask_layouts(llm: Any, questions: dict[str, LayoutQuestion]) -> dict[str, BankProfile | str]:
    """source_file -> the profile the model's checked answer gives, or why there is none (the answer refused by
    the values, or no answer). One greedy batch through the engine."""
    if not questions:
        return {}
    decided = {n: q for n, q in questions.items() if not q.asked()}  # the values leave nothing to choose
    out: dict[str, BankProfile | str] = {n: answer_profile(q, {}) for n, q in decided.items()}
    names = [n for n in questions if n not in decided]
    if not names:
        return out
    prompts = [encode_prompt(llm.tokenizer, "layout", text=shown_table(questions[n])) for n in names]
    params = [SamplingParams(max_tokens=MAX_ANSWER_TOKENS, temperature=0.0, json_schema=layout_schema(questions[n]))
              for n in names]
    for name, request in zip(names, llm.generate(prompts, params, progress=False)):
        result = request.outputs[0]
        if result.finish_reason != "stop":
            out[name] = f"the model gave no complete answer ({request.error or result.finish_reason})"
            continue
        try:
            answer = json.loads(result.text)
        except json.JSONDecodeError as exc:
            out[name] = f"the model's answer is not JSON ({exc.msg})"
            continue
        out[name] = answer_profile(questions[name], answer)
    return out
