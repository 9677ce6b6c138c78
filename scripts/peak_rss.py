"""Run a command and report the peak resident memory of it and all its descendants (sampled every 0.1 s from
/proc, Linux), e.g. the ingest worker next to `pipeline run`:

    python scripts/peak_rss.py .venv/bin/pipeline run --input BIG --output OUT --no-progress
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from pipeline.ingest.worker import rss_bytes


def _children(pid: int) -> list[int]:
    out = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out += _children(int(child))
    except OSError:
        pass
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    proc = subprocess.Popen(argv)
    peak_all = peak_main = 0
    while proc.poll() is None:
        peak_all = max(peak_all, sum(rss_bytes(p) for p in _children(proc.pid)))
        peak_main = max(peak_main, rss_bytes(proc.pid))
        time.sleep(0.1)
    print(f"exit {proc.returncode}; peak RSS: all processes {peak_all / 2**20:.0f} MiB, "
          f"main process {peak_main / 2**20:.0f} MiB", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
