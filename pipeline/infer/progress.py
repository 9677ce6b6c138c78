"""The progress bar of a run's inference stage: requests (documents and windows) per second, with generated tokens/s."""

from __future__ import annotations

import time


class InferProgress:
    """tqdm bar over requests (documents and windows per second) with generated tokens/s."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        self.t0 = time.perf_counter()
        self.tokens = 0
        self.done = 0
        if enabled and total:
            # lazy: only a progress bar needs it
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="extract", unit="req", dynamic_ncols=True)

    def update(self, n: int, tokens: int) -> None:
        self.done += n
        self.tokens += tokens
        if self.bar is not None:
            el = max(time.perf_counter() - self.t0, 1e-9)
            self.bar.set_postfix_str(f"{self.tokens / el:.0f} tok/s", refresh=False)
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
