#!/usr/bin/python3
"""Writes models/sc10-random-init.mega: the base architecture (unidirectional,
so it streams) with RANDOM weights. It exists so the runtime can be built and
run end to end before a trained model is bundled; its labels are meaningless.

  make_placeholder_model.py OUT.mega
"""
import os
import sys
import tempfile

if not __package__:  # run as a file, not with -m: import the tools package from the repository root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from tools.convert import mega_convert  # noqa: E402
from tools.convert import mega_torch as mt  # noqa: E402


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
