"""python3 -m mega_kws scan|classify: keyword_spotter's scan and classify
through the Python package, with the same output (WAV files at the model's
rate only: this reader does not resample).

Exit codes as keyword_spotter's: 0 ok, 1 a file failed, 2 usage error,
3 model not loadable, 4 compute device not available."""

import argparse
import json
import sys

import mega_kws


def _json_str(s):
    return json.dumps(s, ensure_ascii=False)


def _common(p):
    p.add_argument("-m", "--model", help="the .mega model [$MEGA_KWS_MODEL, else the installed demo model]")
    p.add_argument("--backend", default="cpu", help="cpu, cuda or auto [cpu]")
    p.add_argument("-t", "--threads", type=int, default=1, help="CPU threads per chunk [1]")
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m mega_kws", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sc = sub.add_parser("scan", help="print every keyword detection in a recording")
    _common(sc)
    sc.add_argument("--threshold", type=float, help="one threshold for every keyword, (0, 1] [from the model]")
    sc.add_argument("--smoothing", type=int, help="posteriors averaged over this many hops [from the model]")
    sc.add_argument("--refractory-ms", type=int, help="quiet time after a detection [from the model]")
    sc.add_argument("--sensitivity", type=float, help="0..1; 0.5 keeps the thresholds, higher fires more")
    sc.add_argument("file")
    cl = sub.add_parser("classify", help="the most probable label of each clip")
    _common(cl)
    cl.add_argument("files", nargs="+")
    a = ap.parse_args(argv)

    try:
        model = mega_kws._model(a.model)
    except (mega_kws.MegaError, ValueError, OSError) as e:
        print(f"mega_kws: cannot load model: {e}", file=sys.stderr)
        return 3
    try:
        mega_kws.Session(model, backend=a.backend, threads=a.threads).close()
    except mega_kws.MegaError as e:
        print(f"mega_kws: {e}", file=sys.stderr)
        return 4 if e.status in (mega_kws.Status.NO_DEVICE, mega_kws.Status.DEVICE) else 2

    if a.command == "scan":
        opts = dict(threshold=a.threshold, smoothing=a.smoothing, refractory_ms=a.refractory_ms,
                    sensitivity=a.sensitivity)
        try:
            mega_kws.Detector(model, **opts).close()
        except mega_kws.MegaError as e:
            print(f"mega_kws: bad detection settings: {e.message}", file=sys.stderr)
            return 2
        try:
            found, seconds = mega_kws.scan_file(a.file, model, backend=a.backend, threads=a.threads, **opts)
        except (mega_kws.MegaError, ValueError, OSError) as e:
            print(f"mega_kws: {e}", file=sys.stderr)
            return 1
        for d in found:
            if a.json:
                print(f'{{"time_s": {d.time_s:.4f}, "label": {_json_str(d.label)}, "score": {d.score:.4f}}}')
            else:
                print(f"{d.time_s:.3f}\t{d.label}\t{d.score:.3f}")
        print(f"scanned {seconds:.3f} s: {len(found)} detection(s)", file=sys.stderr)
        return 0

    failures = 0
    for path in a.files:
        try:
            r = mega_kws.classify_file(path, model, backend=a.backend, threads=a.threads)
        except (mega_kws.MegaError, ValueError, OSError) as e:
            failures += 1
            if a.json:
                print(f'{{"file": {_json_str(path)}, "error": {_json_str(str(e))}}}')
            else:
                print(f"mega_kws: {path}: {e}", file=sys.stderr)
            continue
        if a.json:
            logits = ", ".join(f"{float(v):.7g}" for v in r.logits)
            print(f'{{"file": {_json_str(path)}, "label": {_json_str(r.label)}, "score": {r.score:.6f}, '
                  f'"logits": [{logits}], "duration_s": {r.duration_s:.3f}, '
                  f'"window_start_s": {r.window_start_s:.3f}, "padded": {"true" if r.padded else "false"}, '
                  f'"sample_rate": {r.sample_rate}}}')
        else:
            line = f"{path}\t{r.label}\t{r.score:.3f}"
            if r.padded:
                line += f"\t(padded from {r.duration_s:.3f} s)"
            if r.window_start_s > 0.0:
                line += f"\t(window at {r.window_start_s:.3f} s)"
            print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
