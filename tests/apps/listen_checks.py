#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The check tests/apps/test_listen.sh makes of keyword_spotter listen's output: the
detections (JSON lines) against the expected labels. Run as
`listen_checks.py detections_expected OUT ERR LABEL...` (or --any); exits
non-zero, saying what it found, if they differ."""

import json
import re
import sys


def detections_expected(argv):
    out, err, expected = argv[1], argv[2], argv[3:]
    dets = []
    for n, line in enumerate(open(out, encoding="utf-8", errors="replace"), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            sys.exit("stdout line %d is not JSON: %r" % (n, line))
        if not isinstance(d, dict) or not isinstance(d.get("label"), str) or not isinstance(d.get("time_s"), (int, float)):
            sys.exit("stdout line %d is not a detection: %r" % (n, line))
        dets.append(d)
    labels = [d["label"] for d in dets]
    print("      detections: %s" % (" ".join("%s@%.2f" % (d["label"], d["time_s"]) for d in dets) or "none"))
    times = [d["time_s"] for d in dets]
    if times != sorted(times):
        sys.exit("detection times go backwards: %s" % times)
    if expected == ["--any"]:
        m = None
        for line in open(err, encoding="utf-8", errors="replace"):
            m = re.match(r"listened ([0-9.]+) s, ([0-9]+) chunks, ([0-9]+) detections, ([0-9]+) overflow frames", line) or m
        if not m:
            sys.exit("no 'listened S s, C chunks, ...' summary on stderr")
        if int(m.group(2)) == 0:
            sys.exit("no chunk went through the model (%s)" % m.group(0))
        if int(m.group(3)) != len(dets):
            sys.exit("summary says %s detections, stdout has %d" % (m.group(3), len(dets)))
        sys.exit(0)
    i = 0
    for label in labels:
        if i < len(expected) and label == expected[i]:
            i += 1
    if i < len(expected):
        sys.exit("expected %s in order; detected %s (missing from '%s' on)" % (expected, labels, expected[i]))


if __name__ == "__main__":
    globals()[sys.argv[1]](sys.argv[1:])  # NAME ARG...: the check NAME, given argv = [NAME, ARG...]
