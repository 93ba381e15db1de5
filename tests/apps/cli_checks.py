#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The checks tests/apps/test_cli.sh makes of the output of keyword_spotter and mega_rtf
(and the bad audio files it writes): one function per check, run as
`cli_checks.py NAME ARG...` (argv: NAME, then the arguments); a failed check
raises AssertionError or exits non-zero, saying what it found."""

import csv
import json
import os
import struct
import sys
import wave


def info_json(argv):
    text = open(argv[1]).read()
    assert text.count("\n") == 1, "one line"
    i = json.loads(text)
    assert i["labels"][:3] == ["yes", "no", "up"] and len(i["labels"]) == 12, i["labels"]
    assert i["hparams"]["sample_rate"] == 16000 and i["hparams"]["window_chunks"] == 4, i["hparams"]
    assert len(i["detection"]["thresholds"]) == 12 and i["self_test"] is True and i["dtype"] == "float32"
    assert "None" not in i["notes"] and i["notes"].endswith("See docs/models.md."), i["notes"]


def selftest_json(argv):
    r = json.loads(open(argv[1]).read())
    assert r["passed"] is True and r["status"] == "ok" and 0 <= r["max_abs_diff"] <= r["tolerance"], r


def samples_classified(argv):
    for l in open(argv[1]):
        r = json.loads(l)
        assert r["label"] == os.path.basename(r["file"])[:-4], r


def scan_finds_commands(argv):
    dets = [d for d in map(json.loads, open(argv[1])) if d["type"] == "detection"]
    words = list(csv.DictReader(open(argv[2])))
    assert [d["label"] for d in dets] == [w["label"] for w in words], dets
    hop = 0.25
    for d, w in zip(dets, words):
        # reported time: the end of the hop in which the word was heard (smoothing only delays the output)
        assert abs(d["time_s"] - float(w["offset_s"])) <= hop + 1e-6, (d, w)


def block_logits_equal_offline(argv):
    a = [json.loads(l) for l in open(argv[1])]
    b = [json.loads(l) for l in open(argv[2])]
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        assert {"file", "label", "score", "logits", "padded", "window_start_s"} <= set(x) and len(x["logits"]) == 12
        assert x["file"] == y["file"] and x["label"] == y["label"]
        assert max(abs(p - q) for p, q in zip(x["logits"], y["logits"])) <= 1e-4 * max(1, max(map(abs, x["logits"])))


def reference_kernels_agree(argv):
    a, b = (json.loads(open(p).readline()) for p in argv[1:3])
    assert max(abs(p - q) for p, q in zip(a["logits"], b["logits"])) <= 1e-4, (a, b)


def formats_agree(argv):
    rows = [json.loads(l) for l in open(argv[1])]
    assert len(rows) == 10
    base = rows[0]["logits"]
    for r in rows:
        assert r["label"] == "stop" and r["padded"] is False, r
    for r in rows[1:5]:  # lossless conversions of the same samples (24-bit, float, FLAC, stereo): the same logits
        assert max(abs(p - q) for p, q in zip(base, r["logits"])) <= 1e-3 * max(1, max(map(abs, base))), r["file"]


def make_bad_files(argv):
    d = argv[1]
    with wave.open(d + "/empty.wav", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000); w.writeframes(b"")
    with wave.open(d + "/rate500.wav", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(500); w.writeframes(b"\0\1" * 500)
    with wave.open(d + "/ch65.wav", "wb") as w:
        w.setnchannels(65); w.setsampwidth(2); w.setframerate(16000); w.writeframes(b"\0\1" * 65 * 100)
    def float_wav(path, samples):
        data = struct.pack("<%df" % len(samples), *samples)
        fmt = struct.pack("<HHIIHH", 3, 1, 16000, 64000, 4, 32)
        with open(path, "wb") as f:
            f.write(b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE")
            f.write(b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data)
    float_wav(d + "/nan.wav", [0.0] * 100 + [float("nan")] + [0.0] * 100)
    float_wav(d + "/inf.wav", [0.0] * 100 + [float("inf")] + [0.0] * 100)
    float_wav(d + "/loud.wav", [1.5, -2.0, 0.5] * 8000)  # float audio beyond full scale


def bad_file_messages(argv):
    rows = {json.loads(l)["file"].rsplit("/", 1)[-1]: json.loads(l) for l in open(argv[1])}
    want = {"missing.wav": "no such file", "adir": "is a directory", "notaudio.wav": "not a readable audio file",
            "empty.wav": "0 frames", "trunc_header.wav": "", "nan.wav": "not a finite number",
            "inf.wav": "not a finite number", "cut.ogg": "no audio could be decoded",
            "rate500.wav": "unsupported sample rate 500 Hz", "ch65.wav": "unsupported channel count 65"}
    for f, needle in want.items():
        assert "error" in rows[f] and needle in rows[f]["error"], (f, rows.get(f))
    assert "label" in rows["stop.wav"]


def rates_short_long(argv):
    r = {json.loads(l)["file"].rsplit("/", 1)[-1]: json.loads(l) for l in open(argv[1])}
    assert r["rate8k.wav"]["sample_rate"] == 8000 and r["s44k.wav"]["sample_rate"] == 44100
    assert r["short.wav"]["padded"] is True and abs(r["short.wav"]["duration_s"] - 0.5) < 1e-3
    assert r["long.wav"]["padded"] is False and abs(r["long.wav"]["duration_s"] - 3.0) < 1e-3
    assert 0.0 <= r["long.wav"]["window_start_s"] <= 2.0


def scan_output(argv):
    rows = [json.loads(l) for l in open(argv[1])]
    assert rows[-1]["type"] == "summary" and rows[-1]["detections"] == len(rows) - 1, rows[-1]
    rows = rows[:-1]
    assert rows, "no detections at threshold 0.2"
    for r in rows:
        assert set(r) == {"type", "file", "time_s", "label", "score"} and r["type"] == "detection" and 0 < r["time_s"] <= 3.0 and 0.2 <= r["score"] <= 1.0
        assert abs(r["time_s"] / 0.25 - round(r["time_s"] / 0.25)) < 1e-3  # chunk hops of 250 ms


def several_files(argv):
    one = [json.loads(l) for l in open(argv[1])]
    rows = [json.loads(l) for l in open(argv[2])]
    cmds, long_wav = argv[3], argv[4]
    assert one and all(r["file"] == cmds for r in one)  # one file: named too
    assert [r["file"] for r in rows if r["type"] == "summary"] == [cmds, long_wav, cmds], rows
    # the first and the third file are the same recording: the same detections at the same times
    assert rows[:len(one)] == one and rows[-len(one):] == one, rows


def threshold_silences_one(argv):
    before, after = ([d["label"] for d in map(json.loads, open(p)) if d["type"] == "detection"] for p in argv[1:3])
    word = argv[3]
    assert word in before and word not in after, (before, after)
    assert after == [x for x in before if x != word], (before, after)


def rtf_fields(argv):
    b = json.loads(open(argv[1]).read())
    for k in ("rtf", "chunk_ms_p50", "chunk_ms_p99", "peak_rss_mb", "load_ms", "threads", "backend"):
        assert k in b, k
    assert b["rtf"] > 0 and b["chunk_ms_p99"] >= b["chunk_ms_p50"] > 0 and b["backend"] == "cpu"


def files(argv):
    """Prints the "file" of each JSON line of argv[1]."""
    for line in open(argv[1]):
        print(json.loads(line)["file"])


def same_labels(argv):
    """The JSON lines of argv[1] and argv[2] name the same labels, in order."""
    a, b = ([json.loads(line).get("label") for line in open(p)] for p in argv[1:3])
    sys.exit(a != b)


def first_label(argv):
    """Prints the label of the first JSON line of argv[1]."""
    print(json.loads(open(argv[1]).readline())["label"])


def every_label_at_one(argv):
    """Prints LABEL=1.0,... for every label detected in argv[1] (JSON lines), sorted."""
    print(",".join(sorted({d["label"] + "=1.0" for d in map(json.loads, open(argv[1])) if "label" in d})))


if __name__ == "__main__":
    globals()[sys.argv[1]](sys.argv[1:])  # NAME ARG...: the check NAME, given argv = [NAME, ARG...]
