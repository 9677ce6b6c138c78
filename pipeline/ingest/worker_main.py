"""Entry point of an ingest worker process (`pipeline.ingest.worker.FileWorker` starts it):

    python -m pipeline.ingest.worker_main TASK_FD RESULT_FD LIMITS_JSON MODULE:PARSER
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

from pipeline.ingest.limits import IngestLimits
from pipeline.ingest.worker import load_parser, serve

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """End this process when the run that started it dies, even by SIGKILL: Linux's parent-death signal, and a
    watchdog thread on the parent's pid elsewhere (or if the parent died before the signal was armed)."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def main(argv: list[str]) -> int:
    task_fd, out_fd, limits_json, parser = argv
    die_with_parent()
    serve(Connection(int(task_fd), writable=False), Connection(int(out_fd), readable=False),
          IngestLimits.model_validate_json(limits_json), load_parser(parser))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
