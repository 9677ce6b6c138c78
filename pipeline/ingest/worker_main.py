"""Entry point of an ingest worker process (`pipeline.ingest.worker.FileWorker` starts it):

    python -m pipeline.ingest.worker_main TASK_FD RESULT_FD LIMITS_JSON MODULE:PARSER
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection

from pipeline.ingest.limits import IngestLimits
from pipeline.ingest.worker import load_parser, serve


def main(argv: list[str]) -> int:
    task_fd, out_fd, limits_json, parser = argv
    serve(Connection(int(task_fd), writable=False), Connection(int(out_fd), readable=False),
          IngestLimits.model_validate_json(limits_json), load_parser(parser))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
