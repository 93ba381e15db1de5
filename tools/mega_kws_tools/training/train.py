#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Train a streaming (unidirectional) Mega-chunk keyword spotter.

  python3 -m mega_kws_tools.training.train --data DIR --classes kws12 --out RUN_DIR [--steps N]
      [--preset demo|paper-base]

DIR is any Speech Commands-layout folder (one folder per word,
validation_list.txt, testing_list.txt): the real Speech Commands v0.02, or
the synthetic set from mega_kws_tools.data.make_sc10.

Classes:
  sc10   the ten keywords only (the paper's SC10 setting)
  kws12  the ten keywords + _silence_ + _unknown_ (what a live detector needs).
         _unknown_ = every other word folder; _silence_ = a _silence_ folder if
         present, else 1 s crops of _background_noise_.

Streaming-aware examples: each training input is a context second (silence,
noise or non-keyword speech) followed by the target second, shifted by up to
+-0.1 s so words do not line up with chunk boundaries. The loss uses the
logits over the last window only (MegaKWS.window_logits), which is exactly
what a streaming session reports, with the EMA state carrying the context.

Checkpoints (RUN_DIR/last.pt, best.pt) hold the config, weights, labels,
optimizer and RNG state: mega_kws_tools.convert.mega_convert reads them, and
--resume continues an interrupted run. SIGINT (Ctrl-C) or SIGTERM ends the
step under way, saves last.pt and exits with 128 + the signal's number, so
--resume goes on from that step; a second signal stops at once. With
--weight-average, validation and best.pt use the running average of the
weights; last.pt keeps both.

The options are the fields of training.config.TrainConfig; training.loop runs
them (loop.run(TrainConfig(...)) does the same from Python).
"""

import sys

from mega_kws_tools.training import config, loop


def main(argv=None) -> int:
    cfg = config.parse(argv, __doc__)
    try:
        return loop.run(cfg)
    except loop.RunError as e:
        if e.args[0] is not None:  # (None: said already)
            print(f"train.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
