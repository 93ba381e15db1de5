# SPDX-License-Identifier: Apache-2.0
"""python3 -m mega_kws scan|classify: keyword_spotter's scan and classify
through the Python package, with the same output (WAV files at the model's
rate only: this reader does not resample).

  python3 -m mega_kws scan [-m MODEL] [options] FILE... (- for standard input)
  python3 -m mega_kws classify [-m MODEL] [options] FILE...
  python3 -m mega_kws --version

Several files: each is scanned on its own, its name in front of each line
(as keyword_spotter does); a file that fails is reported and the others are
still read. "-" is standard input, a WAV stream (read whole before it is
scanned). Exit codes as keyword_spotter's for the same fault: 0 ok, 1 a file
failed, 2 usage error (numbers out of range, with keyword_spotter's messages;
no model given and no default; a bidirectional model for scan), 3 model not
loadable, 4 compute device not available."""

import argparse
import io
import json
import math
import os
import sys

import mega_kws
from mega_kws._args import REFRACTORY_MS_RANGE, SMOOTHING_HOPS_RANGE

SMOOTHING = "{}..{}".format(*SMOOTHING_HOPS_RANGE)  # as the help states them
REFRACTORY = "{}..{}".format(*REFRACTORY_MS_RANGE)


def _json_str(s):
    """A JSON string as keyword_spotter writes it (apps/common/json_escape.h): DEL escaped too."""
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _json_file(path):
    """'"file": ...' as keyword_spotter writes it: a name that is not UTF-8 with
    U+FFFD for its bad bytes, and its exact bytes in "file_hex"."""
    raw = os.fsencode(path)
    text = raw.decode("utf-8", errors="replace")
    hex_part = "" if text.encode("utf-8") == raw else f', "file_hex": "{raw.hex()}"'
    return f'"file": {_json_str(text)}{hex_part}'


class _Usage(Exception):
    pass


def _number(text, lo, hi, message, integer=False):
    """text as a number in [lo, hi], as keyword_spotter's parse_int /
    parse_float take it (the whole argument; no NaN); else a usage error."""
    if text is None:
        return None
    try:
        v = int(text) if integer else float(text)
    except ValueError:
        raise _Usage(message) from None
    if math.isnan(v) or not lo <= v <= hi:
        raise _Usage(message)
    return v


def _threshold(text):
    """--threshold T (every keyword) or LABEL=T,... (those labels), T in (0, 1],
    as keyword_spotter parses it: a float, a {label: T} dict, or None."""
    if text is None:
        return None
    if "=" not in text:
        v = _number(text, 0.0, 1.0, "--threshold needs a number in (0, 1], or LABEL=T,...")
        if v <= 0.0:
            raise _Usage("--threshold needs a number in (0, 1], or LABEL=T,...")
        return v
    out = {}
    for item in text.split(","):
        label, eq, value = item.partition("=")
        try:
            t = _number(value, 0.0, 1.0, "") if label and eq else None
        except _Usage:
            t = None
        if t is None or t <= 0.0:
            raise _Usage(f"--threshold: '{item}' is not LABEL=T with T in (0, 1]")
        if label in out:
            raise _Usage(f"--threshold: '{label}' given twice")
        out[label] = t
    return out


def _reason(path, e):
    """What went wrong with a file, without its path (said once by the caller)."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = str(e)
    prefix = f"{path}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _common(p):
    p.add_argument("-m", "--model", help="the .mega model [$MEGA_KWS_MODEL, else the installed demo model]")
    p.add_argument("--backend", default="cpu", help="cpu, reference, cuda or auto [cpu]")
    p.add_argument("-t", "--threads", default="1", help="CPU threads per chunk, 1..16 [1]")
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def _parser():
    ap = argparse.ArgumentParser(prog="python3 -m mega_kws", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", action="version", version=f"mega_kws {mega_kws.__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    sc = sub.add_parser("scan", help="print every keyword detection in recordings")
    _common(sc)
    sc.add_argument("--threshold", help="T in (0, 1] for every keyword, or per keyword by label (go=0.8,on=0.85; "
                                        "the others keep the model's) [from the model]")
    sc.add_argument("--smoothing", help=f"posteriors averaged over this many hops, {SMOOTHING} [from the model]")
    sc.add_argument("--refractory-ms", help=f"quiet time after a detection, {REFRACTORY} [from the model]")
    sc.add_argument("--sensitivity", help="0..1; 0.5 keeps the thresholds, higher fires more")
    sc.add_argument("files", nargs="+", metavar="FILE", help="WAV files; - for standard input")
    cl = sub.add_parser("classify", help="the most probable label of each clip")
    _common(cl)
    cl.add_argument("files", nargs="+", metavar="FILE", help="WAV files; - for standard input")
    return ap


def _check_numbers(a):
    """keyword_spotter's ranges and messages (apps/keyword_spotter/cli_options.cpp; apps/common/)."""
    a.threads = _number(a.threads, 1, 16, "--threads needs an integer in [1, 16]", integer=True)
    if a.command == "scan":
        a.threshold = _threshold(a.threshold)
        a.smoothing = _number(a.smoothing, *SMOOTHING_HOPS_RANGE, "--smoothing needs an integer in [{}, {}]"
                              .format(*SMOOTHING_HOPS_RANGE), integer=True)
        a.refractory_ms = _number(a.refractory_ms, *REFRACTORY_MS_RANGE, "--refractory-ms needs an integer in "
                                  "[{}, {}]".format(*REFRACTORY_MS_RANGE), integer=True)
        a.sensitivity = _number(a.sensitivity, 0.0, 1.0, "--sensitivity needs a number in [0, 1]")
    if a.files.count("-") > 1:
        raise _Usage("standard input (-) can be read only once")
    a.model = a.model or mega_kws.default_model_path()
    if not a.model:
        raise _Usage("no model: give -m PATH (no default model: $MEGA_KWS_MODEL is not set and none is installed)")


def _open(a):
    """The model and a trial session (a device or option fault shows before any
    file is read): (model, None) or (None, the exit code)."""
    try:
        model = mega_kws.Model(a.model)
    except (mega_kws.MegaError, OSError) as e:
        print(f"mega_kws: cannot load model: {e}", file=sys.stderr)
        return None, 3
    if a.command == "scan" and not model.streamable:
        print("mega_kws: scan needs a streaming (unidirectional) model; this one is bidirectional (use classify)",
              file=sys.stderr)
        return None, 2
    try:
        mega_kws.Session(model, backend=a.backend, threads=a.threads).close()
    except mega_kws.MegaError as e:
        print(f"mega_kws: {e}", file=sys.stderr)
        if e.status in (mega_kws.Status.NO_DEVICE, mega_kws.Status.DEVICE):
            return None, 4
        return None, 2 if e.status == mega_kws.Status.INVALID_ARGUMENT else 3
    return model, None


def _source(path):
    """What the readers take for path: standard input (read whole, named "-") for "-"."""
    if path != "-":
        return path
    if sys.stdin is None:
        raise OSError("no standard input")
    data = io.BytesIO(sys.stdin.buffer.read())
    data.name = "-"
    return data


def _detector_options(a, model):
    """The detector's overrides, or None after a usage error (exit 2)."""
    opts = dict(threshold=a.threshold, smoothing=a.smoothing, refractory_ms=a.refractory_ms,
                sensitivity=a.sensitivity)
    by_label = a.threshold if isinstance(a.threshold, dict) else {}
    unknown = [label for label in by_label if label not in model.labels]
    if unknown:
        print(f"mega_kws: --threshold: the model has no label '{unknown[0]}' (its labels: {','.join(model.labels)})",
              file=sys.stderr)
        return None
    try:
        mega_kws.Detector(model, **opts).close()
    except mega_kws.MegaError as e:
        print(f"mega_kws: bad detection settings: {e.message}", file=sys.stderr)
        return None
    return opts


def _scan(a, model):
    opts = _detector_options(a, model)
    if opts is None:
        return 2
    several = len(a.files) > 1
    rc = 0
    for path in a.files:
        try:
            stats = {}
            found, seconds = mega_kws.scan_file(_source(path), model, backend=a.backend, threads=a.threads,
                                                stats=stats, **opts)
        except (mega_kws.MegaError, ValueError, OSError) as e:
            print(f"mega_kws: {path}: {_reason(path, e)}", file=sys.stderr)
            if a.json:
                print(f'{{"type": "error", {_json_file(path)}, "error": {_json_str(_reason(path, e))}}}')
            rc = 1
            continue
        for d in found:
            if a.json:
                print(f'{{"type": "detection", {_json_file(path)}, "time_s": {d.time_s:.4f}, '
                      f'"label": {_json_str(d.label)}, "score": {d.score:.4f}}}')
            else:
                print(f"{path}\t" * several + f"{d.time_s:.3f}\t{d.label}\t{d.score:.3f}")
        print(f"{path}: " * several + f"scanned {seconds:.3f} s: {len(found)} detection(s)", file=sys.stderr)
        if a.json:
            print(f'{{"type": "summary", {_json_file(path)}, "duration_s": {seconds:.3f}, '
                  f'"detections": {len(found)}, "clipped_samples": {stats["n_clamped_samples"]}}}')
    return rc


def _print_classification(a, path, r):
    if a.json:
        logits = ", ".join(f"{float(v):.7g}" for v in r.logits)
        print(f'{{"type": "classification", {_json_file(path)}, "label": {_json_str(r.label)}, "score": {r.score:.6f}, '
              f'"logits": [{logits}], "duration_s": {r.duration_s:.3f}, '
              f'"window_start_s": {r.window_start_s:.3f}, "padded": {"true" if r.padded else "false"}, '
              f'"sample_rate": {r.sample_rate}}}')
        return
    line = f"{path}\t{r.label}\t{r.score:.3f}"
    if r.padded:
        line += f"\t(padded from {r.duration_s:.3f} s)"
    if r.window_start_s > 0.0:
        line += f"\t(window at {r.window_start_s:.3f} s)"
    print(line)


def _classify(a, model):
    failures = 0
    for path in a.files:
        try:
            r = mega_kws.classify_file(_source(path), model, backend=a.backend, threads=a.threads)
        except (mega_kws.MegaError, ValueError, OSError) as e:
            failures += 1
            if a.json:
                print(f'{{"type": "error", {_json_file(path)}, "error": {_json_str(_reason(path, e))}}}')
            else:
                print(f"mega_kws: {path}: {_reason(path, e)}", file=sys.stderr)
            continue
        _print_classification(a, path, r)
    return 1 if failures else 0


def main(argv=None):
    a = _parser().parse_args(argv)  # exits 2 on a usage error, 0 after --help or --version
    try:
        _check_numbers(a)
    except _Usage as e:
        print(f"mega_kws: {e} (try --help)", file=sys.stderr)
        return 2
    model, rc = _open(a)
    if model is None:
        return rc
    return _scan(a, model) if a.command == "scan" else _classify(a, model)


if __name__ == "__main__":
    sys.exit(main())
