#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Numerical parity of our PyTorch reference (mega_kws_tools.model) with the official Mega code.

  check_official.py --official-repo PATH [--sizes tiny,base] [--json] [--rev HEAD]

PATH is a checkout of github facebookresearch/mega or a bare git dir of it. No
official code lives in this file: the needed official source files are copied
(or `git show`n) into a temporary `fairseq` package at run time, next to a few
stub modules that only satisfy imports the Mega modules never use. All the math
(MovingAverageGatedAttention, MultiHeadEMA, NormalizedFeedForwardNetwork,
SequenceNorm, RealNumberEmbedding, SimpleRelativePositionalBias, utils.laplace,
gelu, the SCRawModel head) runs from the official files.

Per configuration: random weights from mega_torch.randomize_for_testing are
copied by name into the official model (strict load), saved as an official
checkpoint {'args', 'model'} and read back with mega_torch.load_checkpoint; then
both models classify the same input (batch 2, N(0, 0.5^2), float32). Reported:
max |logit diff| and max |final feature diff|, ours in float32 and in float64.
Exit status 1 if any difference exceeds its tolerance (see ABS_TOL, NOISE_FACTOR).
"""

import argparse
import copy
import dataclasses
import importlib.machinery
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

from mega_kws_tools import model as mega_torch

OFFICIAL_FILES = [
    "fairseq/utils.py", "fairseq/incremental_decoding_utils.py",
    "fairseq/modules/gelu.py", "fairseq/modules/layer_drop.py", "fairseq/modules/fairseq_dropout.py",
    "fairseq/modules/layer_norm.py", "fairseq/modules/scale_norm.py",
    "fairseq/modules/root_mean_square_norm.py", "fairseq/modules/sequence_norm.py",
    "fairseq/modules/real_number_embedding.py", "fairseq/modules/relative_positional_bias.py",
    "fairseq/modules/exponential_moving_average.py", "fairseq/modules/moving_average_gated_attention.py",
    "fairseq/modules/normalized_feedforward_network.py", "fairseq/modules/mega_sentence_encoder_layer.py",
    "fairseq/models/speech_commands/mega_scraw_encoder.py", "fairseq/models/speech_commands/model.py",
]

# Our own minimal stubs: package inits, and names imported by the official files
# but never reached by the eval forward of the SC model.
STUBS = {
    "fairseq/__init__.py": "",
    "fairseq/data/__init__.py": "",
    "fairseq/data/iterators.py": "# stub: imported by fairseq/utils.py, unused here\n",
    "fairseq/logging/__init__.py": "",
    "fairseq/logging/meters.py": "def safe_round(*args, **kwargs):\n    raise NotImplementedError('stub')\n",
    "fairseq/modules/multihead_attention.py":
        "class MultiheadAttention:\n    def __init__(self, *args, **kwargs):\n"
        "        raise NotImplementedError('stub')\n",
    "fairseq/modules/transformer_sentence_encoder.py":
        "def init_bert_params(module):\n    raise NotImplementedError('stub: apply_bert_init is off')\n",
    "fairseq/modules/__init__.py": (
        "from .gelu import gelu, gelu_accurate\n"
        "from .fairseq_dropout import FairseqDropout, FairseqFeatureDropout\n"
        "from .layer_drop import LayerDropModuleList\n"
        "from .real_number_embedding import RealNumberEmbedding\n"
        "from .sequence_norm import SequenceNorm\n"
        "from .mega_sentence_encoder_layer import MegaSentenceEncoderLayer\n"),
    "fairseq/models/__init__.py": (
        "import torch.nn as nn\n\n\n"
        "class FairseqEncoder(nn.Module):\n"
        "    def __init__(self, dictionary):\n"
        "        super().__init__()\n"
        "        self.dictionary = dictionary\n\n\n"
        "class FairseqEncoderModel(nn.Module):\n"
        "    def __init__(self, encoder):\n"
        "        super().__init__()\n"
        "        self.encoder = encoder\n\n\n"
        "def register_model(name):\n    return lambda cls: cls\n\n\n"
        "def register_model_architecture(model_name, arch_name):\n    return lambda fn: fn\n"),
    "fairseq/models/speech_commands/__init__.py": "",
}

# Pass criterion, per quantity q (logits, final features) and per ours in {f32, f64}:
#   max|official - ours| <= max(ABS_TOL[size], NOISE_FACTOR * max|ours_f32 - ours_f64|)
# The official code computes in float32 only, so even a perfect reference differs
# from it by float32 rounding. That rounding is measured on the spot as the
# float32 noise floor of this network (our own float32 vs float64). It is ~1e-7 on
# tiny nets, ~1e-5..1e-4 on base (6 layers of 16000-point FFT convolutions and
# 1000-term unnormalized attention sums), and far larger where random weights make
# activations explode (base uni reaches features ~1e5 at some seeds: then float32
# itself is off by ~1e2 and no absolute bound is meaningful). A wrong op shows up as a relative
# error of 1e-3..1 of the output, orders above NOISE_FACTOR times the floor.
ABS_TOL = {"tiny": 1e-5, "base": 1e-4}
NOISE_FACTOR = 8.0


def read_official(repo, rev):
    """Returns (dict path -> source text, description of the source)."""
    if os.path.isdir(os.path.join(repo, "fairseq")):
        files = {}
        for path in OFFICIAL_FILES:
            with open(os.path.join(repo, path), encoding="utf-8") as f:
                files[path] = f.read()
        return files, f"checkout {repo}"
    git = ["git", f"--git-dir={repo}"]
    try:
        commit = subprocess.run(git + ["rev-parse", rev], check=True, capture_output=True, text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        raise SystemExit(f"error: {repo} is neither a checkout (no fairseq/) nor a git dir with {rev}: {e}")
    files = {}
    for path in OFFICIAL_FILES:
        r = subprocess.run(git + ["show", f"{commit}:{path}"], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"error: {repo} at {commit} lacks {path}: {r.stderr.strip()}")
        files[path] = r.stdout
    return files, f"git dir {repo} at {commit}"


def import_official(files, root):
    for path, text in list(files.items()) + list(STUBS.items()):
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as f:
            f.write(text)
    # the temporary package imported by its folder, not through sys.path; its
    # modules then import each other through fairseq.__path__ (root/fairseq)
    spec = importlib.machinery.PathFinder.find_spec("fairseq", [root])
    package = importlib.util.module_from_spec(spec)
    sys.modules["fairseq"] = package
    spec.loader.exec_module(package)
    import fairseq.models.speech_commands.model as sc_model
    import fairseq.modules.mega_sentence_encoder_layer as mega_layer_mod
    assert os.path.abspath(sc_model.__file__).startswith(os.path.abspath(root))
    return sc_model, mega_layer_mod


@dataclasses.dataclass
class Case:
    name: str
    size: str
    cfg: mega_torch.MegaConfig
    samples: int


def base_cases():
    out = []
    for bi in (False, True):
        cfg = mega_torch.MegaConfig(bidirectional=bi, window_chunks=16)
        out.append(Case(f"base-{'bi' if bi else 'uni'}", "base", cfg, 16000))
    return out


def tiny_cases():
    out = []
    dims = dict(embed_dim=8, hidden_dim=12, ffn_hidden_dim=12, z_dim=6, n_dim=3, n_layers=2, chunk_size=10,
                classifier_dim=16, window_chunks=4)
    for attn, norm, pre, bi, trunc in itertools.product(mega_torch.ATTENTION_FNS, mega_torch.NORM_TYPES,
                                                        (True, False), (False, True), (15, 0)):
        cfg = mega_torch.MegaConfig(attention_fn=attn, norm_type=norm, prenorm=pre, bidirectional=bi,
                                    truncation=trunc, **dims)
        name = f"tiny-{attn}-{norm}-{'pre' if pre else 'post'}-{'bi' if bi else 'uni'}-t{trunc or 'None'}"
        out.append(Case(name, "tiny", cfg, 40))
    extras = [dict(activation="relu"), dict(activation="gelu"), dict(activation="gelu_accurate"),
              dict(classifier_layers=2, classifier_activation="silu"), dict(ffn_hidden_dim=0),
              dict(truncation=40, bidirectional=True)]
    for extra in extras:
        kw = {**dims, **extra}
        cfg = mega_torch.MegaConfig(**kw)
        out.append(Case("tiny-extra-" + "-".join(f"{k}={v}" for k, v in extra.items()), "tiny", cfg, 40))
    return out


def official_args(cfg, samples):
    """Namespace with the official argument names (mega-spec.md), completed by base_architecture."""
    return argparse.Namespace(
        arch="mega_sc_raw_base", layer_type="mega", encoder_layers=cfg.n_layers,
        encoder_embed_dim=cfg.embed_dim, encoder_hidden_dim=cfg.hidden_dim,
        encoder_ffn_embed_dim=cfg.ffn_hidden_dim, z_dim=cfg.z_dim, n_dim=cfg.n_dim,
        chunk_size=cfg.chunk_size, truncation_length=cfg.truncation or None,
        activation_fn=cfg.activation, attention_activation_fn=cfg.attention_fn, norm_type=cfg.norm_type,
        encoder_normalize_before=cfg.prenorm, rel_pos_bias="simple", classifier_layers=cfg.classifier_layers,
        classifier_out_dim=cfg.classifier_dim, classifier_activation_fn=cfg.classifier_activation,
        sen_rep_type="mp", max_positions=samples, sentence_class_num=cfg.n_classes,
        dropout=0.0, attention_dropout=0.0, act_dropout=0.0, feature_dropout=False, apply_bert_init=False)


def build_official(sc_model, mega_layer_mod, args, bidirectional):
    """SCRawModel.build_model; for uni, MovingAverageGatedAttention gets bidirectional=False."""
    official_cls = mega_layer_mod.MovingAverageGatedAttention
    if not bidirectional:
        mega_layer_mod.MovingAverageGatedAttention = lambda **kw: official_cls(**{**kw, "bidirectional": False})
    try:
        model = sc_model.SCRawModel.build_model(copy.deepcopy(args), None)
    finally:
        mega_layer_mod.MovingAverageGatedAttention = official_cls
    return model.eval()


def to_official_names(state):
    out = {}
    for name, value in state.items():
        if name == "embed_tokens.weight":
            value = value.reshape(-1)  # ours (D, 1) for kernel 1, official (D,)
        keep = name.startswith(("classifier.", "sentence_projection_layer."))
        out[name if keep else mega_torch.FAIRSEQ_PREFIX + name] = value.clone()
    return out


def max_abs(a, b):
    return float((a.double() - b.double()).abs().max())


def run_case(case, sc_model, mega_layer_mod, tmp, seed):
    torch.manual_seed(seed)  # randomize_for_testing perturbs the constructor's (global RNG) EMA beta
    ours = mega_torch.MegaKWS(copy.deepcopy(case.cfg))
    mega_torch.randomize_for_testing(ours, seed)
    args = official_args(case.cfg, case.samples)
    official = build_official(sc_model, mega_layer_mod, args, case.cfg.bidirectional)
    official.load_state_dict(to_official_names(ours.state_dict()), strict=True)
    path = os.path.join(tmp, "official.pt")
    torch.save({"args": args, "model": official.state_dict()}, path)
    ours32, fmt, _ = mega_torch.load_checkpoint(path)
    want = dataclasses.replace(case.cfg, sample_rate=ours32.cfg.sample_rate)
    if fmt != "fairseq" or ours32.cfg != want:
        raise AssertionError(f"load_checkpoint gave format {fmt} and config {ours32.cfg}, expected {want}")
    ours64 = copy.deepcopy(ours32).double().eval()

    g = torch.Generator().manual_seed(seed + 1)
    s = torch.randn(2, case.samples, generator=g) * 0.5
    lengths = torch.full((2,), case.samples, dtype=torch.long)
    captured = []  # official final-normed features (T, B, D), from the same forward as the logits
    hook = official.encoder.register_forward_hook(lambda mod, inp, out: captured.append(out[0][0]))
    with torch.no_grad():
        off_logits = official({"net_input": {"src_tokens": s, "src_lengths": lengths}})["encoder_out"]
        hook.remove()
        got = {"logit": off_logits, "feat": captured[0].transpose(0, 1)}
        ours_out = {}
        for tag, model, x in (("f32", ours32, s), ("f64", ours64, s.double())):
            feats = model.features(x)
            ours_out[tag] = {"logit": model.head(feats.mean(dim=1)), "feat": feats}
    row = {"config": case.name, "size": case.size, "samples": case.samples, "seed": seed,
           "max_abs_logit": float(off_logits.abs().max()), "max_abs_feat": float(got["feat"].abs().max())}
    ok = True
    for q in ("logit", "feat"):
        noise = max_abs(ours_out["f32"][q], ours_out["f64"][q])
        tol = max(ABS_TOL[case.size], NOISE_FACTOR * noise)
        row[f"{q}_f32_noise"], row[f"{q}_tol"] = noise, tol
        for tag in ("f32", "f64"):
            row[f"{q}_diff_{tag}"] = max_abs(got[q], ours_out[tag][q])
            ok = ok and row[f"{q}_diff_{tag}"] <= tol
    row["ok"] = ok
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--official-repo", required=True, help="checkout or bare git dir of facebookresearch/mega")
    ap.add_argument("--rev", default="HEAD", help="revision to read from a git dir (default HEAD)")
    ap.add_argument("--sizes", default="tiny,base", help="comma list of tiny, base (default both)")
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    ap.add_argument("--seed", type=int, default=3,
                    help="base seed (default 3: O(1) activations in both base models; some seeds make "
                         "base uni explode, e.g. 1234 gives features ~1e5, still checked via the noise floor)")
    opts = ap.parse_args(argv)
    sizes = [s for s in opts.sizes.split(",") if s]
    for s in sizes:
        if s not in ABS_TOL:
            ap.error(f"unknown size {s!r} (known: {', '.join(ABS_TOL)})")
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))

    t0 = time.time()
    files, source = read_official(opts.official_repo, opts.rev)
    cases = [(c, opts.seed + 10 * i) for s in sizes
             for i, c in enumerate(tiny_cases() if s == "tiny" else base_cases())]
    cols = ("max_abs_logit", "logit_diff_f32", "logit_diff_f64", "logit_f32_noise",
            "max_abs_feat", "feat_diff_f32", "feat_diff_f64", "feat_f32_noise")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="mega_official_") as tmp:
        sc_model, mega_layer_mod = import_official(files, os.path.join(tmp, "src"))
        if not opts.json:
            print(f"official source: {source}")
            print("diff_f32/diff_f64: max|official - ours in float32/float64|; noise: max|ours f32 - ours f64|")
            heads = ("|logit|", "dlogit f32", "dlogit f64", "noise", "|feat|", "dfeat f32", "dfeat f64", "noise")
            print(f"{'config':58s} {'T':>5s} " + " ".join(f"{h:>10s}" for h in heads) + "  ok")
        for case, seed in cases:
            t1 = time.time()
            row = run_case(case, sc_model, mega_layer_mod, tmp, seed)
            row["seconds"] = round(time.time() - t1, 3)
            failed += not row["ok"]
            if opts.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{row['config']:58s} {row['samples']:5d} " + " ".join(f"{row[c]:10.3g}" for c in cols)
                      + f"  {'ok' if row['ok'] else 'FAIL'}", flush=True)
    summary = {"cases": len(cases), "failed": failed, "seconds": round(time.time() - t0, 1),
               "abs_tol": {s: ABS_TOL[s] for s in sizes}, "noise_factor": NOISE_FACTOR,
               "official_source": source}
    print(json.dumps({"summary": summary}) if opts.json else
          f"{len(cases) - failed}/{len(cases)} configurations within tolerance (max(abs {summary['abs_tol']}, "
          f"{NOISE_FACTOR:g} x float32 noise)); {summary['seconds']} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
