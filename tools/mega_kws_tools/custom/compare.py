# SPDX-License-Identifier: Apache-2.0
"""The two alternatives to the command's frozen-encoder head, measured against it
on a word with real recordings (docs/custom-keywords.md):

  python3 -m mega_kws_tools.custom.compare --word bed --model bed.mega finetune [--steps 600]
  python3 -m mega_kws_tools.custom.compare --word bed --model bed.mega teacher

`--model` is the command's model of the word (its renderings are read from
work/custom/text/<word>-*/). Both build the same examples: the renderings by
the training voices, 2,500 windows of the training speakers' keyword-free
speech, 1,500 real clips of other words, non-speech sounds. `finetune` trains
the encoder's last layer, its final norm and the head (inputs to that layer
cached), starting from --model; `teacher` trains a head on the pretrained
teacher's frozen embedding (work/teacher). Each is judged beside --model as
is: per smoothing (1-4 windows), the threshold at which the validation
speakers' keyword-free speech gives at most 1 (and 3) false alarms an hour,
and the share of the validation speakers' clips of the word it finds.
"""

import argparse
import glob
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools.convert.loading import load_model
from mega_kws_tools.custom import examples as ex
from mega_kws_tools.custom import fit
from mega_kws_tools.custom import realdata as rd
from mega_kws_tools.custom.evaluate import clip_names
from mega_kws_tools.custom.head import balanced_weights
from mega_kws_tools.custom.paths import ROOT
from mega_kws_tools.data.sc10_audio import load_16k

SR = 16000


def training_audio(word, data, rng):
    """(audio (N, 2 s), class): keyword 0, _silence_ 1, _unknown_ 2."""
    txt = glob.glob(os.path.join(ROOT, "work", "custom", "text", f"{word}-*", "renders.npz"))
    if not txt:
        sys.exit(f"compare: no renderings of '{word}' under work/custom/text (run the command first)")
    z = np.load(txt[0])
    by = {}
    for row, x in fit.split_renders(z["audio"], z["lengths"], json.loads(str(z["info"]))):
        if row[2] == "train":
            by.setdefault(row[1], []).extend([x] * 3)
    speech = rd.load_speech(rd.speech_paths(data, "training")[0])
    speech = speech[: int(len(speech) * rd.TRAIN_SHARE)].astype(np.float32) / 32768.0
    audio, y = ex.build(by, 1, rng, speech, 150, 1)
    sp = np.stack([speech[a:a + 2 * SR] for a in rng.integers(0, len(speech) - 2 * SR, 2500)])
    rw = np.stack([ex.place(load_16k(p), rng, None, []) for _, p in rd.real_words(data, {word}, 1500, rng)])
    return np.concatenate([audio, sp, rw]), np.concatenate([y, np.full(len(sp) + len(rw), 2)])


def draw(y, rng, batch):
    w = balanced_weights(y, 3)
    return rng.choice(len(y), batch, p=w / w.sum())


def finetune(model, audio, y, steps, rng):
    """The last encoder layer, the final norm and the head trained on cached layer inputs."""
    cached = []
    with torch.no_grad():
        for i in range(0, len(audio), 64):
            trace = []
            model.features(torch.from_numpy(audio[i:i + 64]), trace)
            cached.append(trace[-2].half())
    h, yt = torch.cat(cached), torch.from_numpy(y)
    layer, norm = model.layers[-1], model.final_norm
    body = list(layer.parameters()) + (list(norm.parameters()) if norm is not None else [])
    head = [p for lin in model.classifier for p in lin.parameters()] + list(model.sentence_projection_layer.parameters())
    for p in model.parameters():
        p.requires_grad_(False)
    for p in body + head:
        p.requires_grad_(True)
    opt = torch.optim.AdamW([{"params": body, "lr": 2e-4}, {"params": head, "lr": 1e-3}], weight_decay=1e-3)
    window = model.cfg.window_chunks * model.cfg.chunk_size
    for _ in range(steps):
        idx = draw(y, rng, 32)
        x = layer(h[idx].float())
        x = norm(x) if norm is not None else x
        loss = F.cross_entropy(model.head(x[:, -window:].mean(1)), yt[idx], label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def mega_scores(model, clips, speech):
    """(P[clip, window] of label 0 after the model's warm-up, Q[window] over the speech)."""
    with torch.no_grad():
        p = [torch.softmax(model.head(ex.hop_embeddings(model, torch.from_numpy(clips[i:i + 64]))), -1)[..., 0]
             for i in range(0, len(clips), 64)]
        q = torch.softmax(model.head(torch.from_numpy(ex.speech_hops(model, speech))), -1)[:, 0]
    return torch.cat(p).numpy()[:, model.cfg.window_chunks:], q.numpy()


def judge(name, p, q, hop_s, out):
    hours = len(q) * hop_s / 3600.0
    for s in (1, 2, 3, 4):
        k = np.ones(s) / s
        ps = np.array([np.convolve(row, k, "valid").max() for row in p])
        qs = np.convolve(q, k, "valid")
        for limit in (1, 3):
            thr = 1.0
            for cand in np.round(np.arange(0.99, 0.295, -0.01), 2):  # down while the false alarms stay under
                if np.sum((qs[1:] >= cand) & (qs[:-1] < cand)) / hours > limit:
                    break
                thr = cand
            out.append({"model": name, "smoothing": s, "fa_per_hour": limit, "threshold": float(thr),
                        "recall": round(float(np.mean(ps >= thr)), 4)})
            print(f"{name}: smoothing {s}, <= {limit} false alarm(s)/h: threshold {thr:.2f}, "
                  f"found {100 * out[-1]['recall']:.1f}%", flush=True)


def validation_clips(word, data):
    folder = os.path.join(data, "real_sc", word)
    rng = np.random.default_rng(11)
    out = []
    for f in clip_names(folder, "validation"):
        c = load_16k(os.path.join(folder, f))[:SR]
        out.append(np.concatenate([rng.standard_normal(24000).astype(np.float32) * 3e-4, c,
                                   np.zeros(2 * SR - len(c), np.float32)]))
    return np.stack(out)  # 3.5 s each: 1.5 s of faint noise, the clip, silence


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m mega_kws_tools.custom.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["finetune", "teacher"])
    ap.add_argument("--word", required=True)
    ap.add_argument("--model", required=True, help="the command's model of the word")
    ap.add_argument("--data", default=os.path.join(ROOT, "work", "data"))
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    rng = np.random.default_rng(5)
    clips = validation_clips(args.word, args.data)
    speech = rd.load_speech(rd.speech_paths(args.data, "validation")[0]).astype(np.float32) / 32768.0
    frozen = load_model(args.model)[0].eval()
    hop_s = frozen.cfg.chunk_samples / SR
    out = []
    judge("frozen encoder, new head", *mega_scores(frozen, clips, speech), hop_s, out)
    audio, y = training_audio(args.word, args.data, rng)
    if args.what == "finetune":
        tuned = finetune(load_model(args.model)[0], audio, y, args.steps, rng)
        judge("last layer fine-tuned", *mega_scores(tuned, clips, speech), hop_s, out)
    else:
        from mega_kws_tools.custom import teacher_head
        judge("teacher embedding, new head", *teacher_head.scores(audio, y, clips, speech, rng), 0.24, out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())


