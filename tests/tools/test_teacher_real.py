#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The teacher's port on the real files, where they are present (fetched by
`python3 -m mega_kws_tools.teacher.fetch --check-head work/teacher/check`;
MEGA_TEACHER_DIR names another folder): every value of both graphs against the
numpy evaluator on the sample recordings and synthetic audio, and end to end,
openWakeWord's hey_jarvis head (CC BY-NC-SA: a check only, never training)
on the ported embeddings: above 0.5 on "hey jarvis" said by text-to-speech
voices, below on the ten keywords, recorded and rendered. Skips without them."""

import glob
import os
import shutil

import numpy as np
import pytest
import torch

from mega_kws_tools.audio import SR, read_wav
from mega_kws_tools.data import sc10_render
from mega_kws_tools.teacher import features, fetch, graph, port_check, torch_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
MODELS = os.environ.get("MEGA_TEACHER_DIR", os.path.join(ROOT, fetch.DEFAULT_OUT))
HEAD = os.path.join(MODELS, "check", "hey_jarvis_v0.1.onnx")
KEYWORD_WAVS = sorted(w for w in glob.glob(os.path.join(ROOT, "samples", "*.wav")) if "commands" not in w)
KEYWORDS = [os.path.basename(w)[:-4] for w in KEYWORD_WAVS]
# English voices of three engines (none reserved); espeak-ng rate in words a minute and pitch 0-99, flite and
# festival a duration stretch and a mean pitch in Hz, as sc10_render takes them
VOICES = [("espeak-ng", "en-us", "", 160, 50), ("espeak-ng", "en-gb", "", 160, 50),
          ("espeak-ng", "en-gb-scotland", "", 160, 50), ("espeak-ng", "en-gb-x-rp", "", 160, 50),
          ("espeak-ng", "en-029", "", 160, 50), ("espeak-ng", "en-us", "f2", 160, 50),
          ("flite", "kal16", "", 1.0, 100), ("festival", "kal_diphone", "", 1.0, 100)]
MIN_VOICES = 5

needs_files = pytest.mark.skipif(not all(os.path.isfile(os.path.join(MODELS, n)) for n in fetch.TEACHER_FILES),
                                 reason=f"teacher files not in {MODELS} (python3 -m mega_kws_tools.teacher.fetch)")


@pytest.fixture(scope="module")
def graphs():
    return features.load_graphs(MODELS)


@needs_files
def test_real_graphs_node_by_node(graphs):
    ported = (torch_port.PortedGraph(graphs[0], dtype=torch.float64), torch_port.PortedGraph(graphs[1]))
    clips = {w: read_wav(w)[:4 * SR].astype(np.float32) for w in KEYWORD_WAVS + [os.path.join(ROOT, "samples",
                                                                                              "commands.wav")]}
    clips.update(port_check.synthetic_audio())
    for label, audio in clips.items():
        for name, rows in port_check.check_audio(graphs, ported, audio).items():
            assert len(rows) == {"melspectrogram": 29, "embedding": 65}[name]
            top = max(rows, key=lambda r: r["ratio"])
            assert top["ratio"] <= port_check.TOLERANCE, f"{label} {name}: {top}"
    same_length = [a for a in clips.values() if len(a) == SR]
    assert port_check.check_teacher(graphs, same_length) <= port_check.TOLERANCE


def score(teacher, head, audio_int16) -> float:
    """hey_jarvis's best score over the clip with a second of silence either side (openWakeWord's predict_clip
    pads the same), on the ported embeddings."""
    pad = np.zeros(SR, np.float32)
    x = torch.from_numpy(np.concatenate([pad, np.asarray(audio_int16, np.float32), pad]))[None]
    with torch.no_grad():
        embeddings = teacher(x)[0].numpy()
    return port_check.head_score(head, embeddings)


@needs_files
@pytest.mark.skipif(not os.path.isfile(HEAD), reason=f"no check head {HEAD} (fetch --check-head)")
@pytest.mark.skipif(not all(shutil.which(p) for p in ("espeak-ng", "flite", "text2wave")), reason="no TTS programs")
def test_hey_jarvis_head_on_ported_embeddings(graphs, tmp_path, monkeypatch):
    teacher, head = features.Teacher(*graphs), graph.load(HEAD)
    monkeypatch.setitem(sc10_render.G, "tmp_root", str(tmp_path))
    said, keyword_scores = {}, {}
    for engine, voice, variant, rate, pitch in VOICES:
        spk = dict(engine=engine, voice=voice, variant=variant, rate=rate, pitch=pitch)
        x = sc10_render.synthesize(spk, "hey jarvis")
        if len(x) == 0:
            continue
        name = f"{engine}:{voice}{'+' + variant if variant else ''}"
        said[name] = score(teacher, head, x * 32768)
        for word in KEYWORDS:
            w = sc10_render.synthesize(spk, word)
            if len(w):
                keyword_scores[f"{name} {word}"] = score(teacher, head, w * 32768)
    for path in KEYWORD_WAVS + [os.path.join(ROOT, "samples", "commands.wav")]:
        keyword_scores[os.path.basename(path)] = score(teacher, head, read_wav(path))
    print("hey jarvis:", {k: round(v, 4) for k, v in said.items()})
    print("keywords, highest:", sorted(((round(v, 4), k) for k, v in keyword_scores.items()), reverse=True)[:5])
    assert len(said) >= MIN_VOICES, f"only {len(said)} voices rendered"
    assert all(s > 0.5 for s in said.values()), said
    assert len(keyword_scores) >= len(KEYWORDS) * (MIN_VOICES + 1)
    assert all(s < 0.5 for s in keyword_scores.values()), {k: v for k, v in keyword_scores.items() if v >= 0.5}
