#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Times the PyTorch reference (tools/mega_kws_tools/model/) and our runtime on
the same clip and the same model, with the same thread count, in one run, and
prints the ratio.

  bench/compare_pytorch.py [--checkpoint CKPT] [--clip WAV] [--threads N]
                           [--rounds R] [--seconds S] [--build DIR] [--json]

The model: by default the paper's base architecture with the random weights
of models/sc10-random-init.mega (the recipe of
tools/mega_kws_tools/convert/make_placeholder_model.py); or any checkpoint the converter
reads (--checkpoint). It is converted to a temporary .mega file, so both
sides run the same weights; the script checks that they give the same logits
on the clip.

PyTorch: the float32 model in eval mode on the 1-window clip, torch threads =
--threads, timed after a warm-up. Ours: `mega_rtf --json` (bench/rtf.cpp) on the
same clip (looped), streaming chunk by chunk, which is the same computation
for a unidirectional model. The two alternate for --rounds rounds so that a
change in the machine's load hits both; the medians are compared. Times by
the clock and as process CPU time (all threads), since a shared machine
gives a process less than a whole core.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import wave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")  # the mega_kws_tools package, for this test and the tools it runs
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(ROOT, "python"))  # the mega_kws package: its WAV reader
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)

# numpy, torch, mega_torch and mega_convert are imported in main(), once the
# thread variables are set: Debian's numpy and torch run their matrix products
# on OpenBLAS, which sizes its thread pool when it is loaded and ignores
# torch.set_num_threads.
np = torch = mt = mega_convert = None

LABELS = "yes,no,up,down,left,right,on,off,stop,go".split(",")


def placeholder_model():
    """The base architecture with the weights of models/sc10-random-init.mega."""
    torch.manual_seed(0)
    model = mt.MegaKWS(mt.MegaConfig())
    mt.randomize_for_testing(model, seed=2026)
    return model.eval()


def read_wav(path):
    """Mono float32 samples in [-1, 1] and the rate, as the runtime reads them: the Python package's
    reader (python/mega_kws/_wav.py, the project's one WAV parser in Python; imported here, after main()
    has set the thread variables, since it loads numpy)."""
    from mega_kws import read_wav as read_mono
    try:
        x, rate, _ = read_mono(path)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    return x, rate


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return -1.0


def time_torch(model, clip, reps):
    """Per-clip wall and CPU seconds of reps forwards, and the logits."""
    x = torch.from_numpy(clip).view(1, -1)
    walls, cpus = [], []
    with torch.inference_mode():
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            logits = model(x)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    return walls, cpus, logits.view(-1).numpy()


def run_ours(rtf, model_path, wav, threads, seconds):
    out = subprocess.run([rtf, "-m", model_path, "--threads", str(threads), "--seconds", str(seconds),
                          "--json", wav], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", help="a checkpoint the converter reads (default: the placeholder base model)")
    ap.add_argument("--clip", default=os.path.join(ROOT, "samples", "yes.wav"), help="WAV at the model's rate")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="alternating PyTorch / runtime rounds")
    ap.add_argument("--seconds", type=float, default=10.0, help="audio our runtime streams per round")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory with keyword_spotter and bench/mega_rtf")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    ks = os.path.join(args.build, "keyword_spotter")
    rtf = os.path.join(args.build, "bench", "mega_rtf")
    for prog in (ks, rtf):
        if not os.access(prog, os.X_OK):
            raise SystemExit(f"{prog} not found: build first (or pass --build)")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    global np, torch, mt, mega_convert
    import numpy as np  # noqa: E402
    import torch  # noqa: E402
    from mega_kws_tools import model as mt  # noqa: E402
    from mega_kws_tools.convert import mega_convert  # noqa: E402
    torch.set_num_threads(args.threads)
    labels = LABELS
    if args.checkpoint:
        model, _, extra = mt.load_checkpoint(args.checkpoint)
        labels = list(extra.get("labels", [])) or [f"class{i}" for i in range(model.cfg.n_classes)]
        source = args.checkpoint
    else:
        model = placeholder_model()
        source = "base architecture, random weights of models/sc10-random-init.mega"
    cfg = model.cfg
    if cfg.bidirectional:
        raise SystemExit("the runtime streams unidirectional models only; bench one of those")

    samples, rate = read_wav(args.clip)
    if rate != cfg.sample_rate:
        raise SystemExit(f"{args.clip}: {rate} Hz, the model wants {cfg.sample_rate} Hz")
    window = cfg.window_samples
    clip = np.zeros(window, dtype=np.float32)
    clip[:min(window, len(samples))] = samples[:window]
    clip_s = window / cfg.sample_rate

    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "model.mega")
        wav_path = os.path.join(tmp, "clip.wav")
        data, _ = mega_convert.build_model_file(model, labels, source_format="compare_pytorch")
        mega_convert.write_atomic(model_path, data)
        with wave.open(wav_path, "wb") as w:  # the padded window, as both sides see it
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(cfg.sample_rate)
            w.writeframes(np.clip(np.round(clip * 32768.0), -32768, 32767).astype("<i2").tobytes())
        clip = read_wav(wav_path)[0].astype(np.float32)  # exactly what the runtime reads

        # same model, same clip: the logits must agree
        out = subprocess.run([ks, "classify", "-m", model_path, "--json", wav_path], check=True,
                             capture_output=True, text=True).stdout
        ours_logits = np.array(json.loads(out)["logits"], dtype=np.float64)
        _, _, torch_logits = time_torch(model, clip, 1)  # also the warm-up
        logit_diff = float(np.abs(ours_logits - torch_logits).max())

        load_before = load_average()
        torch_wall, torch_cpu, ours_rtf, ours_rtf_cpu, ours_p99 = [], [], [], [], []
        for _ in range(args.rounds):
            w, c, _ = time_torch(model, clip, 2)
            torch_wall += w
            torch_cpu += c
            r = run_ours(rtf, model_path, wav_path, args.threads, args.seconds)
            ours_rtf.append(r["rtf"])
            ours_rtf_cpu.append(r["rtf_cpu"])
            ours_p99.append(r["chunk_ms_p99"])
        load_after = load_average()

    t_rtf = statistics.median(torch_wall) / clip_s
    t_rtf_cpu = statistics.median(torch_cpu) / clip_s
    o_rtf = statistics.median(ours_rtf)
    o_rtf_cpu = statistics.median(ours_rtf_cpu)
    result = {
        "model": source, "clip": args.clip, "threads": args.threads, "rounds": args.rounds,
        "torch_version": torch.__version__, "max_abs_logit_diff": logit_diff,
        "torch_rtf": t_rtf, "torch_rtf_cpu": t_rtf_cpu, "ours_rtf": o_rtf, "ours_rtf_cpu": o_rtf_cpu,
        "ours_chunk_ms_p99": statistics.median(ours_p99),
        "speedup": t_rtf / o_rtf, "speedup_cpu": t_rtf_cpu / o_rtf_cpu,
        "torch_rtf_runs": [round(x / clip_s, 4) for x in torch_wall], "ours_rtf_runs": ours_rtf,
        "load_average": [load_before, load_after],
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"model      {source}")
    print(f"clip       {args.clip} ({clip_s:.2f} s window); same logits within {logit_diff:.2g}")
    print(f"threads    {args.threads}; {args.rounds} alternating rounds; load average {load_before:.2f} -> {load_after:.2f}")
    print(f"{'':10} {'RTF (clock)':>12} {'RTF (CPU)':>12}")
    print(f"{'PyTorch':10} {t_rtf:12.3f} {t_rtf_cpu:12.3f}   (torch {torch.__version__}, median of {len(torch_wall)} clips)")
    print(f"{'runtime':10} {o_rtf:12.3f} {o_rtf_cpu:12.3f}   (mega_rtf, median of {len(ours_rtf)} runs)")
    print(f"{'ratio':10} {t_rtf / o_rtf:11.2f}x {t_rtf_cpu / o_rtf_cpu:11.2f}x   (PyTorch time / runtime time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
