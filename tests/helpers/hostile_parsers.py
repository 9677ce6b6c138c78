"""Parsers that misbehave the ways real ones can (run in the ingest worker process, chosen by file name):
a hang inside C code that no signal handler interrupts, a segfault, a memory blow-up."""

from __future__ import annotations

import ctypes
import re
import time
from typing import Any

from pipeline.ingest.worker import parse_file


def hostile_parse(task: Any, limits: Any) -> Any:
    name = task.source_file
    if name.startswith("hang"):
        re.match(r"(a+)+$", "a" * 64 + "b")  # catastrophic backtracking: hours inside the C regex engine
    if name.startswith("crash"):
        ctypes.string_at(0)  # SIGSEGV
    if name.startswith("slow"):
        time.sleep(2.5)  # a big file's honest parse time
    if name.startswith("oom"):
        hog = []
        while True:
            hog.append(bytearray(64 << 20))
    return parse_file(task, limits)
