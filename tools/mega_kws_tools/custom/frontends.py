# SPDX-License-Identifier: Apache-2.0
"""What the custom-keyword stages learn on, behind one interface (--front-end):

  mega     the backbone's front end and encoder (models/sc10-demo.mega),
           frozen; an example is its window embedding at a hop (D values); a
           new head is trained on those.
  teacher  the pretrained teacher's melspectrogram and speech embedding
           (work/teacher, fetched by mega_kws_tools.teacher.fetch), frozen;
           an example is the teacher's last steps at a hop; new Mega-chunk
           layers and a head on them are trained (teacher_front.py).

Each gives, for the stages (fit.py, stages.py, runner.py):
  embed_last(audio (N, T), progress)   what the model reads at each example's last hop
  hop_embeddings(audio (M, T))         the same at every hop of each sequence (M, hops, ...)
  speech_hops(speech, progress)        (at every hop of a long recording, each hop's end in seconds)
  new_model(n_classes), train(...), posteriors(model, x)
  write(run, model, detection, out)    the .mega file
and hop_s, window_chunks (the detector's hop and warm-up), cache_key, name.
"""

import os

import numpy as np
import torch

from mega_kws_tools.custom import examples as ex
from mega_kws_tools.custom import head as hd
from mega_kws_tools.hashing import sha256_of

SR = 16000


class MegaFront:
    """The backbone's front end and encoder, frozen; a new head."""

    name = "mega"

    def __init__(self, path: str, model):
        self.path, self.model = path, model
        self.sha = sha256_of(path)
        self.cache_key = self.sha[:16]
        self.hop_s = model.cfg.chunk_samples / SR
        self.window_chunks = model.cfg.window_chunks
        self.description = f"the front end and encoder of {os.path.basename(path)} (frozen) with a new head"

    def embed_last(self, audio, progress=None):
        return ex.embed_last(self.model, audio, progress=progress)

    def hop_embeddings(self, audio):
        if not len(audio):
            return np.zeros((0, 12, self.model.cfg.embed_dim), np.float32)
        out = [ex.hop_embeddings(self.model, torch.from_numpy(audio[i:i + 32])).numpy()
               for i in range(0, len(audio), 32)]
        return np.concatenate(out).astype(np.float32)

    def speech_hops(self, speech, progress=None):
        emb = ex.speech_hops(self.model, speech, progress=progress)
        per_piece = int(round(ex.PIECE_S / self.hop_s))
        i = np.arange(len(emb))
        return emb, 1.0 + (i % per_piece + 1) * self.hop_s + (i // per_piece) * ex.PIECE_S

    def new_model(self, n_classes):
        return hd.new_model(self.model, n_classes)

    def train(self, model, emb, y, weights, steps, seed, progress=None):
        return hd.train_head(model, emb, y, weights, steps, seed, progress)

    def posteriors(self, model, emb):
        return hd.posteriors(model, emb)

    def write(self, run, model, detection, out, notes):
        from mega_kws_tools.convert.mega_convert import build_model_file, write_atomic
        data, _ = build_model_file(model, run.labels + ["_silence_", "_unknown_"], detection=detection, notes=notes,
                                   source_sha256=self.sha, source_format="mega-kws custom")
        write_atomic(out, data)


def load(args):
    """The front end --front-end names; None, with the reason printed, if it cannot be had."""
    import sys
    if args.front_end == "teacher":
        from mega_kws_tools.custom.teacher_front import TeacherFront
        try:
            return TeacherFront(args.teacher, args.backbone)
        except ValueError as e:
            print(f"mega_kws_tools.custom: {e}", file=sys.stderr)
            return None
    from mega_kws_tools import model as mt
    from mega_kws_tools.convert.loading import load_init
    ckpt = load_init(args.backbone)
    if ckpt is None:
        return None
    return MegaFront(args.backbone, mt.model_from_config_checkpoint(ckpt).eval())
