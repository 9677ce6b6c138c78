"""Decides, token by token, whether a request is done: EOS, stop ids, grammar end, stop strings, length."""

from __future__ import annotations

from engine.sequence import Sequence
from engine.tokenizer import Tokenizer


class StopChecker:
    def __init__(self, tokenizer: Tokenizer, eos_ids: list[int], max_model_len: int) -> None:
        self.tokenizer = tokenizer
        self.eos = frozenset(eos_ids)
        self.max_model_len = max_model_len

    def check(self, seq: Sequence, tok: int) -> tuple[str, str | None] | None:
        """After `tok` was appended to `seq` (and fed to its matcher): (finish reason, error) or None.

        Sets `seq.stop_text_end` when a stop string matched, so the text can be cut there."""
        p = seq.params
        n_out = seq.num_output_tokens
        if seq.matcher is not None:
            try:
                seq.matcher.accept(tok)
            except ValueError as exc:
                if tok not in self.eos:
                    return "error", f"structured output violated: {exc}"
        if not p.ignore_eos and tok in self.eos and n_out >= p.min_tokens:
            return "stop", None
        if p.stop_token_ids and tok in p.stop_token_ids and n_out >= p.min_tokens:
            return "stop", None
        if seq.matcher is not None and seq.matcher.is_finished():
            return "stop", None
        if p.stop and n_out >= p.min_tokens and self._stop_string_hit(seq):
            return "stop", None
        if n_out >= p.max_tokens or seq.num_tokens >= self.max_model_len:
            return "length", None
        return None

    def _stop_string_hit(self, seq: Sequence) -> bool:
        text = self.tokenizer.decode(seq.output_ids)
        best = None
        for s in seq.params.stop or []:
            idx = text.find(s)
            if idx >= 0 and (best is None or idx < best[0]):
                best = (idx, len(s))
        if best is None:
            return False
        seq.stop_text_end = best[0] + (best[1] if seq.params.include_stop_str_in_output else 0)
        return True
