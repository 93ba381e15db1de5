# SPDX-License-Identifier: Apache-2.0
"""The torch port against the numpy evaluator: every value each graph computes
(each node's outputs), on real and synthetic audio, and the whole teacher
(features.Teacher, batched) against openWakeWord's own loop written in numpy.
A difference counts relative to the range of the value it is in (its max -
min; for a constant value its magnitude): the port passes at <= 1e-4.

Usage (files from mega_kws_tools.teacher.fetch):
  /usr/bin/python3 -m mega_kws_tools.teacher.port_check [--models work/teacher] [WAV ...]
Prints the worst node of each graph for each audio; exit 1 if any is over.
"""

import argparse
import sys

import numpy as np
import torch

from mega_kws_tools.audio import SR, read_wav
from mega_kws_tools.teacher import features, fetch, numpy_ref, torch_port

TOLERANCE = 1e-4
HEAD_FRAMES = 16  # openWakeWord's heads read 16 embeddings (1.28 s)


def scale_of(v: np.ndarray) -> float:
    v = np.asarray(v, dtype=np.float64)
    if v.size == 0:
        return 1.0
    spread = float(v.max() - v.min())
    return spread if spread > 0 else max(float(np.abs(v).max()), 1.0)


def compare_nodes(graph, feeds: dict, ported) -> list:
    """[{name, op, diff, scale, ratio}] for every value the graph computes: numpy_ref against the port."""
    ref = numpy_ref.run(graph, feeds, keep_all=True)
    with torch.no_grad():
        got = ported.run({k: torch.from_numpy(np.asarray(v)) for k, v in feeds.items()}, keep_all=True)
    if set(got) != set(ref):
        raise AssertionError(f"the port computed other values: {sorted(set(got) ^ set(ref))}")
    op_of = {out: n.op for n in graph.nodes for out in n.outputs}
    rows = []
    for name, r in ref.items():
        r, g = np.asarray(r), got[name].cpu().numpy()
        if g.shape != r.shape:
            diff = float("inf")
        else:
            diff = float(np.abs(g.astype(np.float64) - r.astype(np.float64)).max()) if r.size else 0.0
        rows.append(dict(name=name, op=op_of[name], diff=diff, scale=scale_of(r), ratio=diff / scale_of(r)))
    return rows


def numpy_mel(mel_graph, audio: np.ndarray) -> np.ndarray:
    """One clip (int16 values) -> scaled log-mel frames [T, 32], by the numpy evaluator."""
    out = numpy_ref.run(mel_graph, {mel_graph.inputs[0]: np.asarray(audio, np.float32)[None]})
    # openWakeWord's melspec_transform, written again here rather than taken from features
    return np.squeeze(out[mel_graph.outputs[0]], axis=(0, 1)) / 10 + 2


def numpy_windows(spec: np.ndarray) -> np.ndarray:
    """openWakeWord's windowing loop (utils.py, _get_embeddings; its numbers, not features'): [K, 76, 32, 1]."""
    windows = []
    for i in range(0, spec.shape[0], 8):
        window = spec[i:i + 76]
        if window.shape[0] == 76:
            windows.append(window)
    return np.array(windows, dtype=np.float32)[..., None]


def numpy_embeddings(mel_graph, embedding_graph, audio: np.ndarray) -> np.ndarray:
    """One clip -> embeddings [K, 96], the whole way in numpy."""
    windows = numpy_windows(numpy_mel(mel_graph, audio))
    out = numpy_ref.run(embedding_graph, {embedding_graph.inputs[0]: windows})
    return out[embedding_graph.outputs[0]].reshape(len(windows), -1)


def synthetic_audio(n: int = SR, seed: int = 0) -> dict:
    """Hostile and plain signals as int16 values: silence, loud and faint noise, tones, clicks, a full-scale square."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    clicks = np.zeros(n)
    clicks[rng.integers(0, n, 20)] = 30000
    return {
        "silence": np.zeros(n),
        "noise": rng.normal(0, 3000, n),
        "faint noise": rng.normal(0, 2, n),
        "tone 440 Hz": 8000 * np.sin(2 * np.pi * 440 * t),
        "sweep 50-7900 Hz": 8000 * np.sin(2 * np.pi * (50 * t + (7850 / 2) * t * t * SR / n)),
        "clicks": clicks,
        "square 32767": 32767 * np.sign(np.sin(2 * np.pi * 200 * t)),
    }


def check_audio(graphs, ported, audio: np.ndarray) -> dict:
    """{graph name: rows} for one clip: the melspectrogram graph on it, the embedding graph on its windows."""
    mel_graph, embedding_graph = graphs
    audio = np.asarray(audio, np.float32)
    rows = {"melspectrogram": compare_nodes(mel_graph, {mel_graph.inputs[0]: audio[None]}, ported[0])}
    windows = numpy_windows(numpy_mel(mel_graph, audio))
    rows["embedding"] = compare_nodes(embedding_graph, {embedding_graph.inputs[0]: windows}, ported[1])
    return rows


def check_teacher(graphs, clips: list) -> float:
    """The whole Teacher, the clips in one batch, against numpy_embeddings clip by clip: the worst ratio."""
    teacher = features.Teacher(*graphs)
    with torch.no_grad():
        got = teacher(torch.from_numpy(np.stack(clips).astype(np.float32))).numpy()
    worst = 0.0
    for clip, g in zip(clips, got):
        ref = numpy_embeddings(*graphs, clip)
        if g.shape != ref.shape:
            return float("inf")
        worst = max(worst, float(np.abs(g - ref).max()) / scale_of(ref))
    return worst


def head_score(head_graph, embeddings: np.ndarray) -> float:
    """The highest score of an openWakeWord head over every run of 16 consecutive embeddings."""
    best = 0.0
    for i in range(len(embeddings) - HEAD_FRAMES + 1):
        x = embeddings[i:i + HEAD_FRAMES][None].astype(np.float32)
        out = numpy_ref.run(head_graph, {head_graph.inputs[0]: x})
        best = max(best, float(np.asarray(out[head_graph.outputs[0]]).reshape(-1)[0]))
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=fetch.DEFAULT_OUT, help="folder of the two teacher files (%(default)s)")
    ap.add_argument("--seconds", type=float, default=4.0, help="read at most this much of each WAV (%(default)s)")
    ap.add_argument("wavs", nargs="*", help="real audio: 16 kHz WAV files")
    args = ap.parse_args(argv)
    try:
        graphs = features.load_graphs(args.models)
    except ValueError as e:
        print(f"port_check: {e}", file=sys.stderr)
        return 1
    ported = (torch_port.PortedGraph(graphs[0], dtype=torch.float64), torch_port.PortedGraph(graphs[1]))
    clips = {w: read_wav(w)[:int(args.seconds * SR)].astype(np.float32) for w in args.wavs}
    clips.update(synthetic_audio())
    worst = 0.0
    for label, audio in clips.items():
        for name, rows in check_audio(graphs, ported, audio).items():
            top = max(rows, key=lambda r: r["ratio"])
            worst = max(worst, top["ratio"])
            print(f"{label:>24} {name:>14}: {len(rows)} values, worst {top['op']} {top['name']}: "
                  f"{top['diff']:.3g} of range {top['scale']:.3g} = {top['ratio']:.2e}")
    same_length = [a for a in clips.values() if len(a) == SR]
    whole = check_teacher(graphs, same_length)
    print(f"whole teacher, {len(same_length)} clips in one batch against numpy one by one: {whole:.2e}")
    worst = max(worst, whole)
    print(f"worst {worst:.2e} (tolerance {TOLERANCE:.0e}): {'ok' if worst <= TOLERANCE else 'FAILED'}")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
