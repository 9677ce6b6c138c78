"""Parsers that misbehave the ways real ones can (run in the ingest worker process, chosen by file name):
a hang inside C code that no signal handler interrupts, a segfault, a memory blow-up, a file that grows while it is
read, a parser that never returns."""

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
    out = parse_file(task, limits)
    if name.startswith("growing"):  # the nightly upload still writing: more bytes land after the parser read it
        with open(task.path, "a") as f:
            f.write("2024-03-09,-1969.56,EUR,Shop,late,ACC-1\n")
    return out


def sleep_forever(task: Any, limits: Any) -> Any:
    """A parse that never ends, in Python (where the GIL is released between bytecodes)."""
    while True:
        time.sleep(0.1)
