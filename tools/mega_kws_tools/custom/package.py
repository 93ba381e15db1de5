# SPDX-License-Identifier: Apache-2.0
"""The last stages: the .mega file (the backbone's weights, the new head, the
labels and the tuned defaults, written by the converter with its self-test),
checked by the runtime itself, and the figures measured with it."""

import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

from mega_kws_tools.audio import write_wav
from mega_kws_tools.custom import realdata as rd

SR = 16000


def find_runtime(given: str, root: str):
    """The keyword_spotter program: --keyword-spotter, the build tree's, or PATH's."""
    for cand in ([given] if given else []) + [os.path.join(root, "build", "keyword_spotter")]:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return shutil.which("keyword_spotter")


def write_model(run, model, detection, out: str):
    notes = (f"Custom keyword model ({', '.join(run.labels)}) made by mega_kws_tools.custom from text"
             f"{' and the user' + chr(39) + 's recordings' if run.recordings else ''}: {run.fe.description}; "
             "speech of text-to-speech voices (espeak-ng, flite, festival). Real-speaker accuracy is not known.")
    run.fe.write(run, model, detection, out, notes)


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")], r.stderr


def self_test(ks: str, path: str):
    """(ok, message) of the runtime's own check of the written file."""
    rc, out, err = run_json([ks, "selftest", "--json", "-m", path])
    if rc != 0:
        return False, (err.strip().splitlines() or ["self-test failed"])[-1]
    return True, f"runtime self-test passed (max abs logit difference {out[0].get('max_abs_diff', '?')})"


def clip_stream(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A clip as a live stream would carry it, at its own level: 1.5 s of faint
    noise before, 1 s after."""
    pad = lambda n: (rng.standard_normal(n) * 3e-4).astype(np.float32)  # noqa: E731
    y = np.concatenate([pad(int(1.5 * SR)), x, pad(SR)])
    return np.clip(np.round(y * 32767), -32768, 32767).astype(np.int16)


def detected_words(ks: str, model: str, clips, options=()):
    """[set of labels detected] for each clip, scanned by the runtime at the defaults."""
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory(prefix="mega-custom-") as tmp:
        paths = []
        for i, x in enumerate(clips):
            paths.append(os.path.join(tmp, f"{i:05d}.wav"))
            write_wav(paths[-1], clip_stream(x, rng))
        found = [set() for _ in clips]
        index = {p: i for i, p in enumerate(paths)}
        for i in range(0, len(paths), 200):
            _, out, _ = run_json([ks, "scan", "--json", "-m", model, *options] + paths[i:i + 200])
            for row in out:
                if row.get("type") == "detection":
                    found[index[row["file"]]].add(row["label"])
    return found


def false_alarm_rate(ks: str, model: str, data: str, said_like, options=()):
    """(false alarms, keyword-free hours) of the validation speakers' keyword-free
    recording under `data` scanned at the defaults, the sentences that say one
    of `said_like` (the keywords and words said like them) left out; None
    without that recording."""
    paths = rd.speech_paths(data, "validation")
    if paths is None:
        return None
    spoken, free = rd.sentences(paths[1])
    stretches = rd.keyword_free_stretches(free, rd.excluded(spoken, said_like))
    _, out, _ = run_json([ks, "scan", "--json", "-m", model, *options, paths[0]])
    times = [row["time_s"] for row in out if row.get("type") == "detection"]
    fa = sum(any(a <= t <= b for a, b in stretches) for t in times)
    return fa, sum(b - a for a, b in stretches) / 3600.0


def recall_of(ks: str, model: str, clips, labels, options=()):
    """Per label, (detected, clips): the share of clips in which the runtime
    fires their own label at the defaults. clips: [(class, audio)]."""
    found = detected_words(ks, model, [x for _, x in clips], options)
    out = {}
    for (cls, _), got in zip(clips, found):
        d, n = out.get(labels[cls], (0, 0))
        out[labels[cls]] = (d + (labels[cls] in got), n + 1)
    return out


def hold_out_clips(renders):
    from mega_kws_tools.custom.fit import split_renders
    return [(row[1], x) for row, x in split_renders(*renders) if row[2] == "test"]


def check_detects(ks: str, model: str, renders, labels):
    """A rendered hold-out clip of each keyword must be detected by the runtime
    (the file works end to end); returns (ok, message)."""
    clips = hold_out_clips(renders)
    rec = recall_of(ks, model, clips, labels)
    missing = [label for label in labels if rec.get(label, (0, 0))[0] == 0]
    if missing:
        return False, f"the runtime detected none of the hold-out renderings of {', '.join(missing)}"
    return True, "the runtime detects every keyword in hold-out renderings"


