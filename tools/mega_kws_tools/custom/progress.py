# SPDX-License-Identifier: Apache-2.0
"""One progress line per stage on stderr: a bar, the share done, the time spent
and an estimate of the time left (redrawn in place on a terminal, every
quarter elsewhere, so a log stays short)."""

import sys
import time


class Stage:
    def __init__(self, index: int, count: int, name: str, total: float, stream=None):
        self.prefix = f"[{index}/{count}] {name:<8}"
        self.total = max(float(total), 1e-9)
        self.start = time.monotonic()
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_quarter = -1

    def __call__(self, done: float):
        share = min(1.0, done / self.total)
        spent = time.monotonic() - self.start
        quarter = int(share * 4)
        if not self.tty and (quarter == self.last_quarter or share >= 1.0):
            return
        self.last_quarter = quarter
        left = spent / share - spent if share > 0 else float("nan")
        bar = "#" * int(share * 20) + "." * (20 - int(share * 20))
        eta = f", ~{left:.0f} s left" if share > 0 and left == left else ""
        line = f"{self.prefix} {bar} {share * 100:3.0f}%  {spent:.0f} s{eta}"
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self, note: str = "") -> float:
        spent = time.monotonic() - self.start
        line = f"{self.prefix} {'#' * 20} 100%  {spent:.0f} s{('  ' + note) if note else ''}"
        self.stream.write(("\r" + line + "\x1b[K\n") if self.tty else line + "\n")
        self.stream.flush()
        return spent
