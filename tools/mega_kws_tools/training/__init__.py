# SPDX-License-Identifier: Apache-2.0
"""Training: train (the command) and what a run is made of: presets, sampling,
losses, mining (hard examples), the batch worker, the voice adversary, weight
averaging (average; soup for finished runs), checkpoints, the front end's
starting values; mine_hard and mine_nonspeech (hard examples to train on), voice_probe and
voice_norm_check (analyses).

Importing this package sets up the process for training, before numpy or torch
load: one OpenBLAS thread unless the caller says otherwise, and glibc's malloc
keeping freed memory (keep_freed_memory)."""

import os

# Debian's OpenBLAS (the pthread build numpy and torch link here) keeps a worker thread that spins
# between calls, stealing a core from --threads 1 and from a second run beside it: one thread
# unless the caller says otherwise (set before numpy or torch loads it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def keep_freed_memory():
    """Have glibc's malloc keep freed memory for reuse instead of handing it back
    to the kernel: tensors up to 32 MB come from the heap (not a fresh mmap each),
    and the heap is not trimmed below 1 GB free. Each step allocates and frees
    tensors of several MB; fresh pages cost a page fault each, and on this
    project's virtual machines that made a demo-wide step 0.9-1.0 s instead of
    0.6 s. A no-op where the C library has no mallopt."""
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    mallopt(m_mmap_threshold, 32 << 20)  # glibc's largest: HEAP_MAX_SIZE / 2
    mallopt(m_trim_threshold, 1 << 30)
    mallopt(m_top_pad, 64 << 20)


keep_freed_memory()  # before numpy and torch allocate, and for every tool that imports the package
