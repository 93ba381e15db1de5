# SPDX-License-Identifier: Apache-2.0
"""Batches made ahead in a second process (--prefetch), and stopping on a signal."""

import os
import signal

import numpy as np
import torch


def stop_on_signal() -> list:
    """SIGINT and SIGTERM (unless ignored, as for a background job's SIGINT)
    append their number to the returned list, which the training loop checks
    after each step, and restore the default action, so that a second one
    stops the process at once."""
    caught = []

    def handler(signum, frame):
        caught.append(signum)
        signal.signal(signum, signal.SIG_DFL)

    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, handler)
    return caught


class BatchWorker:
    """Training batches drawn ahead by a child process (--prefetch N), so that
    making them (the pitch shift most of all) runs on a second core while this
    one trains. The child draws exactly what the loop would: it is forked
    before the model exists, gets the batch generator's state with start(),
    and sends each batch with the generator's state after it, which next()
    copies into the caller's generator, so checkpoints and --resume see the
    same state as without it (train_smoke compares the losses)."""

    def __init__(self, depth: int, draw):
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        self.orders = ctx.Queue()
        self.slots = ctx.Semaphore(depth)  # batches the child may make before this side takes them
        # batches come through a pipe whose only write end is the child's: if the child dies, even
        # halfway through sending a batch, reading here ends (EOFError) instead of waiting for ever
        self.reader, writer = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=self._work, args=(draw, os.getpid(), writer), daemon=True)
        self.proc.start()
        writer.close()

    def _work(self, draw, parent: int, writer):
        import ctypes
        import traceback
        # die with the trainer, even when it is killed (PR_SET_PDEATHSIG); Ctrl-C, which the terminal
        # sends to both, is the trainer's to handle (it stops after the step and saves)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.reader.close()
        if os.getppid() != parent:
            return
        state, count = self.orders.get()
        rng = np.random.default_rng()
        rng.bit_generator.state = state
        try:
            for _ in range(count):
                self.slots.acquire()
                batch = draw(rng)
                writer.send((tuple(t.numpy() for t in batch), rng.bit_generator.state))
        except Exception:  # noqa: BLE001  (any failure is reported to the trainer, which stops)
            writer.send(("error", traceback.format_exc()))

    def start(self, rng: np.random.Generator, count: int):
        """Draw `count` batches from the generator's present state."""
        self.orders.put((rng.bit_generator.state, count))

    def next(self, rng: np.random.Generator):
        """The next batch, the tuple of tensors draw returned (x, y, ...); rng is left
        where drawing it left the child's."""
        try:
            item = self.reader.recv()  # the child's death closes the pipe's only write end: EOFError
        except (EOFError, OSError):
            self.proc.join(5)
            raise RuntimeError(f"the batch worker (pid {self.proc.pid}) died, exit code "
                               f"{self.proc.exitcode}") from None
        self.slots.release()
        if isinstance(item[0], str):
            raise RuntimeError(f"the batch worker failed:\n{item[1]}")
        arrays, state = item
        rng.bit_generator.state = state
        return tuple(torch.from_numpy(a) for a in arrays)

    def close(self):
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()
        self.reader.close()
