#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes models/sc10-random-init.mega: the base architecture (unidirectional,
so it streams) with RANDOM weights. It exists so the runtime can be built and
run end to end before a trained model is bundled; its labels are meaningless.

  make_placeholder_model.py OUT.mega
"""
import sys


import torch

from mega_kws_tools.convert import mega_convert
from mega_kws_tools import model as mt


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    torch.manual_seed(0)
    model = mt.MegaKWS(mt.MegaConfig())
    mt.randomize_for_testing(model, seed=2026)
    model.eval()
    labels = "yes,no,up,down,left,right,on,off,stop,go".split(",")
    data, logits = mega_convert.build_model_file(
        model, labels, source_format="random-init",
        notes="PLACEHOLDER: random weights (base architecture, unidirectional EMA). Not trained; "
              "its predictions are meaningless.")
    mega_convert.write_atomic(sys.argv[1], data)
    print(f"wrote {sys.argv[1]} ({len(data)} bytes); self-test logits {logits}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
