"""Run the pipeline (fake engine) in this process and SIGKILL it at its Nth filesystem step: every rename,
link, unlink, rmdir, directory exchange or Parquet write of ingest staging, bucket staging, commit, publish and
cleanup counts. With N beyond the last step it prints the number of steps and exits normally.

    python -m tests.helpers.kill_at_step INPUT OUTPUT MODEL N
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def main() -> int:
    inp, out, model, n = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    import pyarrow.parquet as pq

    from pipeline.output import sink
    from pipeline.config import RunConfig
    from pipeline.run import run_pipeline
    from tests.helpers.fake_llm import FakeLLM

    steps = {"n": 0}

    def counted(fn):  # type: ignore[no-untyped-def]
        def step(*a, **k):  # type: ignore[no-untyped-def]
            steps["n"] += 1
            if steps["n"] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*a, **k)
        return step

    for name in ("replace", "rename", "link", "unlink", "rmdir"):
        setattr(os, name, counted(getattr(os, name)))
    if hasattr(sink, "_exchange"):
        sink._exchange = counted(sink._exchange)
    pq.write_table = counted(pq.write_table)
    cfg = RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False,
                    bucket_size=2)
    run_pipeline(cfg, llm=FakeLLM())
    print(steps["n"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
