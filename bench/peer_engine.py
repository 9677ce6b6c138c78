"""What the real workload's peer engines (llama.cpp's server, HF `generate` b4) share: the part of the engine's
`LLM` API a pipeline run calls beyond `generate_stream`, and the way in to a `pipeline run` with a peer as its
engine (the bench starts it as `python -m bench.<peer> ... -- <pipeline run arguments>`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from engine import RequestOutput


class PeerEngine:
    """A subclass gives `generate_stream` (outputs in completion order), `tokenizer`, `max_model_len`,
    `config_summary` and `stats`; `stream` and `generate` are built on it."""

    kv_capacity_tokens = None  # no context-parallel routing: a peer has one context per request

    def generate_stream(self, prompts: Sequence[Sequence[int]], params: Any, progress: bool = False
                        ) -> Iterator[RequestOutput]:
        raise NotImplementedError

    def stream(self, requests: Iterable[tuple[Sequence[int], Any]], progress: bool = False,
               lookahead: int | None = None) -> Iterator[RequestOutput]:
        """`LLM.stream`'s surface (what a run calls): a peer is handed every request at once and batches them its
        own way (llama.cpp's server in its slots)."""
        reqs = list(requests)
        if reqs:
            yield from self.generate_stream([p for p, _ in reqs], [q for _, q in reqs], progress)

    def generate(self, prompts: Sequence[Sequence[int]], params: Any, progress: bool = False) -> list[RequestOutput]:
        """Outputs in input order (the layout questions of a run ask this way)."""
        return sorted(self.generate_stream(prompts, params, progress), key=lambda o: o.index)

    def close(self) -> None:
        """A peer holds nothing the run must hand back."""


def run_pipeline_with(load_llm: Callable[..., Any], run_args: Sequence[str]) -> int:
    """`pipeline run <run_args>`, its engine loaded by `load_llm(model, **engine_kwargs)` when there is work."""
    # lazy: the pipeline's CLI loads only when a peer run starts
    from pipeline.cli import build_parser
    from pipeline.run import Stages

    parsed = build_parser().parse_args(["run", *run_args])
    return int(parsed.func(parsed, stages=Stages(load_llm=load_llm)))


def split_args(argv: Sequence[str], usage: str) -> tuple[list[str], list[str]] | None:
    """(the peer's own arguments, the pipeline run's) around `--`, or None (usage printed) when there is none."""
    args = list(argv)
    if "--" not in args:
        print(f"usage: {usage}", file=sys.stderr)
        return None
    cut = args.index("--")
    return args[:cut], args[cut + 1:]
