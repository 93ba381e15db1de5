#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Convert a Mega keyword-spotting checkpoint (official fairseq or ours) into a .mega file.

  mega_convert.py CHECKPOINT.pt -o MODEL.mega --labels yes,no,up,down,left,right,on,off,stop,go
                  [--input-mean M --input-std S] [--fp16] [--notes TEXT]

The file is written to a temporary name and renamed at the end, so a failed
conversion never leaves a half-written model behind.
"""

import argparse
import math
import numbers
import os
import re
import sys
import tempfile


import numpy as np
import flatbuffers
import torch

from mega_kws_tools import model as mega_torch
from mega_kws_tools.convert import fp16_peaks, mega_format
from mega_kws_tools.convert.schema import (DType, EmaDirection, AttentionFn, NormType, Activation,
                                     Pooling, PatchFeatures, PatchNorm, HParams, Tensor, Detection, Provenance,
                                     SelfTest, Fp16Peak, Fp16Range, Model)
from mega_kws_tools.hashing import sha256_of

CONVERTER_VERSION = "0.1.0"

TENSOR_ALIGN = 64
SELFTEST_TOLERANCE = 1e-3    # max abs logit difference; parity tests use a tighter bound

_ATTN = {"laplace": AttentionFn.AttentionFn.Laplace, "softmax": AttentionFn.AttentionFn.Softmax,
         "relu2": AttentionFn.AttentionFn.Relu2}
_NORM = {"batchnorm": NormType.NormType.BatchNorm, "layernorm": NormType.NormType.LayerNorm,
         "scalenorm": NormType.NormType.ScaleNorm, "rmsnorm": NormType.NormType.RMSNorm}
_ACT = {"silu": Activation.Activation.SiLU, "relu": Activation.Activation.ReLU,
        "gelu": Activation.Activation.GELU, "gelu_accurate": Activation.Activation.GELUTanh,
        "linear": Activation.Activation.Linear}
_PATCH = {"linear": PatchFeatures.PatchFeatures.Linear, "logpower": PatchFeatures.PatchFeatures.LogPower,
          "logmel": PatchFeatures.PatchFeatures.LogMel,
          "teacher_embedding": PatchFeatures.PatchFeatures.TeacherEmbedding}  # teacher.student_convert
_PATCH_NORM = {"none": PatchNorm.PatchNorm.Off, "running_mean": PatchNorm.PatchNorm.RunningMean}


def min_schema_version(cfg) -> int:
    """The oldest schema that describes cfg: files stay readable by older runtimes
    unless they use something those runtimes would misread (schema 2: LogPower;
    3: PatchNorm RunningMean; 4: LogMel; 6: TeacherEmbedding)."""
    if cfg.patch_features == "teacher_embedding":
        return 6
    if cfg.patch_features == "logmel":
        return 4
    if cfg.patch_norm != "none":
        return 3
    return 2 if cfg.patch_features != "linear" else 1


class ConvertError(Exception):
    pass


def file_tensors(model: mega_torch.MegaKWS):
    """(name, float32 numpy array) in file order, with the file's shapes."""
    out = []
    for name, t in model.state_dict().items():
        if name.endswith(mega_torch.IGNORED_SUFFIXES):
            continue
        a = t.detach().to(torch.float32).cpu().numpy()
        if ".move." in name and name.rsplit(".", 1)[1] in ("delta", "alpha", "beta"):
            a = a.reshape(a.shape[0], a.shape[1])  # (E, N, 1) -> (E, N)
        out.append((name, np.ascontiguousarray(a)))
    return out


def self_test_input(cfg: mega_torch.MegaConfig) -> np.ndarray:
    """One window of deterministic, speech-like-ish audio: a gliding tone plus noise."""
    n = cfg.window_samples
    t = np.arange(n) / cfg.sample_rate
    rng = np.random.default_rng(1234)
    tone = 0.3 * np.sin(2 * np.pi * (200 * t + 400 * t * t)) * np.hanning(n)
    return (tone + 0.05 * rng.standard_normal(n)).astype(np.float32)


def reference_logits(model: mega_torch.MegaKWS, samples: np.ndarray) -> np.ndarray:
    """Logits in float64 from the float32 weights (the exact answer the runtime approximates)."""
    m64 = model.double()
    try:
        with torch.no_grad():
            x = torch.from_numpy(samples.astype(np.float64)).unsqueeze(0)
            return m64(x)[0].numpy()
    finally:
        model.float()


def _raw_vector(builder, data: bytes, elem: int, count: int, align: int):
    """A vector of `count` scalars of `elem` bytes, its first element aligned to `align`."""
    builder.StartVector(elem, count, align)
    builder.head = builder.head - len(data)
    builder.Bytes[builder.head:builder.head + len(data)] = data
    return builder.EndVector()


def _float_vector(builder, values):
    values = np.asarray(values, dtype="<f4")
    return _raw_vector(builder, values.tobytes(), 4, len(values), 4)


def _int_vector(builder, values):
    values = np.asarray(values, dtype="<i4")
    return _raw_vector(builder, values.tobytes(), 4, len(values), 4)


def _offset_vector(builder, offsets):
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return builder.EndVector()


# The detector's ranges (runtime/include/mega/detection_limits.hpp, which the loader enforces too); the
# installed converter cannot read the header: tests/test_detection_limits.py checks these agree with it.
SMOOTHING_HOPS_RANGE = (1, 1024)
REFRACTORY_MS_RANGE = (0, 600000)


def check_labels(labels):
    """Labels the runtime loads: each non-empty, without surrounding spaces,
    and distinct (a repeated one would name every detection of the second
    after the first)."""
    first = {}
    for i, label in enumerate(labels):
        if not label or label != label.strip():
            raise ConvertError(f"label {i} is empty or has surrounding spaces ({label!r})")
        if label in first:
            raise ConvertError(f"label '{label}' appears twice (labels {first[label]} and {i}): labels must be "
                               "distinct")
        first[label] = i


def _in_range(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= value <= hi:
        raise ConvertError(f"{name} = {value!r} is not an integer in [{lo}, {hi}]")


def check_detection(detection, labels):
    """Detection defaults the runtime's detector takes (None: none stored):
    a JSON-like object with thresholds (one per label, each in (0, 1]),
    smoothing_hops and refractory_ms in the detector's ranges."""
    if detection is None:
        return
    if not isinstance(detection, dict):
        raise ConvertError("must be a JSON object "
                           '{"thresholds": [...], "smoothing_hops": N, "refractory_ms": MS}')
    # tuned_on: where tune_detection tuned them (its -o file as it is); a record, not stored
    unknown = sorted(set(detection) - {"thresholds", "smoothing_hops", "refractory_ms", "tuned_on"})
    if unknown:
        raise ConvertError(f"unknown key '{unknown[0]}' (known: thresholds, smoothing_hops, refractory_ms, "
                           "tuned_on)")
    thresholds = detection.get("thresholds", [])
    if not isinstance(thresholds, (list, tuple)):
        raise ConvertError(f"thresholds must be a list (one per label), not {thresholds!r}")
    if thresholds and len(thresholds) != len(labels):
        raise ConvertError(f"{len(thresholds)} thresholds for {len(labels)} labels")
    for label, t in zip(labels, thresholds):
        number = isinstance(t, numbers.Real) and not isinstance(t, bool)  # NumPy's too
        if not (number and 0.0 < t <= 1.0):  # False for NaN
            raise ConvertError(f"threshold of label '{label}' is {t if number else repr(t)}; thresholds must be "
                               "in (0, 1]")
    _in_range("smoothing_hops", detection.get("smoothing_hops", 1), *SMOOTHING_HOPS_RANGE)
    _in_range("refractory_ms", detection.get("refractory_ms", 1000), *REFRACTORY_MS_RANGE)


def _model_tensors(model, labels, fp16):
    """The file's (name, array) list, checked against the format and the labels;
    with fp16, the model's own weights rounded to float16 too (the self-test must
    describe the file's weights)."""
    cfg = model.cfg
    if cfg.patch_features not in _PATCH:
        raise ConvertError(f"patch_features {cfg.patch_features!r} is not in the model file format "
                           f"(it has: {', '.join(_PATCH)}); the runtime cannot run this checkpoint yet")
    if len(labels) != cfg.n_classes:
        raise ConvertError(f"--labels has {len(labels)} labels but the model has {cfg.n_classes} classes")
    tensors = file_tensors(model)
    if fp16:
        for name, a in tensors:
            if np.any(np.abs(a) > 65504):
                raise ConvertError(f"tensor {name} has values beyond the float16 range; convert without --fp16")
        with torch.no_grad():
            for p in model.state_dict().values():
                if p.dtype.is_floating_point:
                    p.copy_(p.half().float())
        tensors = file_tensors(model)
    return tensors


def _add_tensors(b, tensors, fp16):
    """The tensors (data first, aligned for SIMD loads); returns their vector."""
    t_offsets = []
    for name, a in tensors:
        raw = a.astype("<f2" if fp16 else "<f4").tobytes()
        data = _raw_vector(b, raw, 1, len(raw), TENSOR_ALIGN)
        shape = _int_vector(b, a.shape)
        nm = b.CreateString(name)
        Tensor.Start(b)
        Tensor.AddName(b, nm)
        Tensor.AddShape(b, shape)
        Tensor.AddDtype(b, DType.DType.F16 if fp16 else DType.DType.F32)
        Tensor.AddData(b, data)
        t_offsets.append(Tensor.End(b))
    return _offset_vector(b, t_offsets)


def _add_detection(b, detection):
    det = detection or {}
    thr = det.get("thresholds", [])
    thr_vec = _float_vector(b, thr) if thr else None
    Detection.Start(b)
    if thr_vec is not None:
        Detection.AddThresholds(b, thr_vec)
    Detection.AddSmoothingHops(b, int(det.get("smoothing_hops", 1)))
    Detection.AddRefractoryMs(b, int(det.get("refractory_ms", 1000)))
    return Detection.End(b)


def _add_provenance(b, source_sha256, source_format, notes):
    strs = [b.CreateString(s) for s in (CONVERTER_VERSION, source_sha256, source_format, notes)]
    Provenance.Start(b)
    Provenance.AddConverterVersion(b, strs[0])
    Provenance.AddSourceSha256(b, strs[1])
    Provenance.AddSourceFormat(b, strs[2])
    Provenance.AddNotes(b, strs[3])
    return Provenance.End(b)


def _add_self_test(b, st_input, st_logits):
    in_vec = _float_vector(b, st_input)
    out_vec = _float_vector(b, st_logits.astype(np.float32))
    SelfTest.Start(b)
    SelfTest.AddInput(b, in_vec)
    SelfTest.AddExpectedLogits(b, out_vec)
    SelfTest.AddTolerance(b, SELFTEST_TOLERANCE)
    return SelfTest.End(b)


def _add_fp16_range(b, peaks):
    """peaks: fp16_peaks.measure's {"residual": (value, tensor, layer), "other": ...}."""
    offs = {}
    for kind in ("residual", "other"):
        value, tensor, layer = peaks[kind]
        name = b.CreateString(tensor)
        Fp16Peak.Start(b)
        Fp16Peak.AddValue(b, value)
        Fp16Peak.AddTensor(b, name)
        Fp16Peak.AddLayer(b, layer)
        offs[kind] = Fp16Peak.End(b)
    Fp16Range.Start(b)
    Fp16Range.AddResidual(b, offs["residual"])
    Fp16Range.AddOther(b, offs["other"])
    return Fp16Range.End(b)


def _add_hparams(b, cfg):
    HParams.Start(b)
    HParams.AddEmbedDim(b, cfg.embed_dim)
    HParams.AddHiddenDim(b, cfg.hidden_dim)
    HParams.AddFfnHiddenDim(b, cfg.ffn_hidden_dim)
    HParams.AddZDim(b, cfg.z_dim)
    HParams.AddNDim(b, cfg.n_dim)
    HParams.AddNLayers(b, cfg.n_layers)
    HParams.AddChunkSize(b, cfg.chunk_size)
    HParams.AddTruncation(b, cfg.truncation)
    HParams.AddEmaDirection(b, EmaDirection.EmaDirection.Bidirectional if cfg.bidirectional
                            else EmaDirection.EmaDirection.Unidirectional)
    HParams.AddAttentionFn(b, _ATTN[cfg.attention_fn])
    HParams.AddNormType(b, _NORM[cfg.norm_type])
    HParams.AddNormEps(b, cfg.norm_eps)
    HParams.AddPrenorm(b, cfg.prenorm)
    HParams.AddActivation(b, _ACT[cfg.activation])
    HParams.AddPooling(b, Pooling.Pooling.Mean)
    HParams.AddClassifierLayers(b, cfg.classifier_layers)
    HParams.AddClassifierDim(b, cfg.classifier_dim)
    HParams.AddClassifierActivation(b, _ACT[cfg.classifier_activation])
    HParams.AddNClasses(b, cfg.n_classes)
    HParams.AddPatchKernel(b, cfg.patch_kernel)
    HParams.AddPatchStride(b, cfg.patch_stride)
    HParams.AddWindowChunks(b, cfg.window_chunks)
    HParams.AddPatchFeatures(b, _PATCH[cfg.patch_features])
    HParams.AddPatchLogEps(b, cfg.patch_log_eps)
    HParams.AddPatchNorm(b, _PATCH_NORM[cfg.patch_norm])
    HParams.AddPatchNormDecay(b, cfg.patch_norm_decay)
    if cfg.patch_features == "logmel":
        HParams.AddPatchBins(b, len(mega_torch.mel_bins(cfg.patch_kernel, cfg.sample_rate)))
        HParams.AddPatchBands(b, cfg.patch_bands)
    return HParams.End(b)


def build_model_file(model, labels, *, input_mean=None, input_std=None, fp16=False,
                     source_sha256="", source_format="", notes="", detection=None,
                     schema_version=None, tensor_hook=None, fp16_range=True):
    """Serializes a model (weights, hparams, labels, self-test, float16 peaks)
    into .mega bytes.

    Returns (file bytes, self-test logits). tensor_hook (tests only) may edit
    the (name, array) list just before it is written; fp16_range=False (tests
    only) leaves the float16 peaks out, as files before schema 5 did.
    """
    cfg = model.cfg
    check_labels(labels)
    try:
        check_detection(detection, labels)
    except ConvertError as e:
        raise ConvertError(f"detection defaults: {e}") from None
    tensors = _model_tensors(model, labels, fp16)
    st_input = self_test_input(cfg)
    model.input_mean, model.input_std = input_mean, input_std
    st_logits = reference_logits(model, st_input)
    peaks = fp16_peaks.measure(model, st_input) if fp16_range else None

    if tensor_hook is not None:
        tensors = tensor_hook(tensors)
    data = model_file_bytes(cfg, labels, tensors, (st_input, st_logits), peaks, fp16=fp16, input_mean=input_mean,
                            input_std=input_std, source_sha256=source_sha256, source_format=source_format,
                            notes=notes, detection=detection, schema_version=schema_version)
    return data, st_logits


def model_file_bytes(cfg, labels, tensors, self_test, peaks, *, fp16=False, input_mean=None, input_std=None,
                     source_sha256="", source_format="", notes="", detection=None, schema_version=None):
    """The .mega bytes: hparams of cfg, the (name, array) tensors as they are, self_test = (input,
    logits), peaks = fp16_peaks.measure's (None: left out, the runtime measures them)."""
    b = flatbuffers.Builder(1 << 20)
    tensors_vec = _add_tensors(b, tensors, fp16)
    label_vec = _offset_vector(b, [b.CreateString(x) for x in labels])
    det_off = _add_detection(b, detection)
    prov_off = _add_provenance(b, source_sha256, source_format, notes)
    st_off = _add_self_test(b, *self_test)
    hp_off = _add_hparams(b, cfg)
    range_off = _add_fp16_range(b, peaks) if peaks else None

    Model.Start(b)
    Model.AddSchemaVersion(b, min_schema_version(cfg) if schema_version is None else schema_version)
    Model.AddHparams(b, hp_off)
    Model.AddSampleRate(b, cfg.sample_rate)
    Model.AddInputScaling(b, input_mean is not None)
    Model.AddInputMean(b, float(input_mean or 0.0))
    Model.AddInputStd(b, float(input_std if input_std is not None else 1.0))
    Model.AddLabels(b, label_vec)
    Model.AddTensors(b, tensors_vec)
    Model.AddDetection(b, det_off)
    Model.AddProvenance(b, prov_off)
    Model.AddSelfTest(b, st_off)
    if range_off is not None:
        Model.AddFp16Range(b, range_off)
    root = Model.End(b)
    b.Finish(root, file_identifier=mega_format.FILE_IDENTIFIER)
    return mega_format.add_trailer(bytes(b.Output()))


def write_atomic(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".mega-convert-", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp creates 0600; a model file is not a secret
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_PLACEHOLDERS = {"None", "?", "nan", "NaN", "null", "n/a"}


def placeholder_clause(notes: str):
    """The first clause of the notes ('; ' or '. ' ends one) that reads 'what: None ?',
    a placeholder where a figure belongs (keyword_spotter info leaves such
    clauses out); None if there is none."""
    for clause in re.split(r"[;.](?: |$)", notes):
        _, colon, value = clause.rpartition(":")
        words = value.split()
        if colon and words and all(w in _PLACEHOLDERS for w in words):
            return clause.strip()
    return None


def _embedding_line(cfg) -> str:
    return (f"patch kernel {cfg.patch_kernel}, stride {cfg.patch_stride}, features {cfg.patch_features}"
            + (f" (eps {cfg.patch_log_eps:g})" if cfg.patch_features == "logpower" else "")
            + (f" ({len(mega_torch.mel_bins(cfg.patch_kernel, cfg.sample_rate))} bins in {cfg.patch_bands} bands, "
               f"eps {cfg.patch_log_eps:g})" if cfg.patch_features == "logmel" else "")
            + (f", less their running mean (decay {cfg.patch_norm_decay:g})" if cfg.patch_norm != "none" else ""))


def summary(model, labels, fmt, nbytes, fp16, input_mean, input_std, logits, front_end=None) -> str:
    """The conversion's printout; front_end = (file cfg, parameters, embedding line) for a front end
    that is not the model's own (teacher.student_convert)."""
    cfg = model.cfg
    n_params, embedding = sum(a.size for _, a in file_tensors(model)), _embedding_line(cfg)
    if front_end is not None:
        cfg, n_params, embedding = front_end
    lines = [
        f"source format : {fmt}",
        f"dims          : D={cfg.embed_dim} H={cfg.hidden_dim} FFN={cfg.ffn_hidden_dim} Z={cfg.z_dim} N={cfg.n_dim}",
        f"layers        : {cfg.n_layers}, chunk {cfg.chunk_size} tokens ({cfg.chunk_samples} samples), "
        f"EMA truncation {cfg.truncation or 'none'}",
        f"EMA direction : {'bidirectional (clip only)' if cfg.bidirectional else 'unidirectional (streams)'}",
        f"attention     : {cfg.attention_fn}, norm {cfg.norm_type} ({'prenorm' if cfg.prenorm else 'postnorm'}), "
        f"activation {cfg.activation}",
        f"embedding     : {embedding}",
        f"window        : {cfg.window_chunks} chunks = {cfg.window_samples / cfg.sample_rate:.3f} s at {cfg.sample_rate} Hz",
        "input scaling : " + (f"(x - {input_mean}) / ({input_std} + 1e-5)" if input_mean is not None else "none"),
        f"labels        : {','.join(labels)}",
        f"parameters    : {n_params} ({'float16' if fp16 else 'float32'})",
        f"file size     : {nbytes} bytes",
        f"self-test     : logits {np.array2string(logits, precision=4, max_line_width=200)}",
    ]
    return "\n".join(lines)


def check_notes(notes: str) -> None:
    bad_note = placeholder_clause(notes)
    if bad_note:
        raise ConvertError(f"--notes: '{bad_note}' has a placeholder where a figure belongs: "
                           "give the figure or leave the clause out")


def labels_and_detection(args, extra):
    """(labels, detection) from --labels and --detection, else the checkpoint dict's; each checked,
    an error naming where it came from."""
    labels = args.labels.split(",") if args.labels else list(extra.get("labels", []))
    if not labels:
        raise ConvertError("--labels is required for this checkpoint (labels are not stored in it)")
    check_labels(labels)
    detection, source = extra.get("detection"), "the checkpoint's detection defaults"
    if args.detection:
        import json
        with open(args.detection) as f:
            detection, source = json.load(f), f"--detection {args.detection}"
    try:  # named by where they came from
        check_detection(detection, labels)
    except ConvertError as e:
        raise ConvertError(f"{source}: {e}") from None
    return labels, detection


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Convert a Mega keyword-spotting checkpoint into a .mega model file.")
    ap.add_argument("checkpoint", help="official fairseq Mega speech-commands checkpoint or a mega-kws training checkpoint")
    ap.add_argument("-o", "--output", required=True, help="output .mega file")
    ap.add_argument("--labels", help="comma-separated labels in class order (default: from a mega-kws checkpoint)")
    ap.add_argument("--input-mean", type=float, help="training-set mean of the samples (official pipeline)")
    ap.add_argument("--input-std", type=float, help="training-set std of the samples (official pipeline)")
    ap.add_argument("--fp16", action="store_true", help="store tensors as float16 (half the size)")
    ap.add_argument("--notes", default="", help="free text stored in the file's provenance")
    ap.add_argument("--detection", help="JSON file with detection defaults: "
                    '{"thresholds": [per label], "smoothing_hops": N, "refractory_ms": MS}')
    args = ap.parse_args(argv)

    try:
        if (args.input_mean is None) != (args.input_std is None):
            raise ConvertError("--input-mean and --input-std go together")
        if args.input_std is not None and not (args.input_std >= 0 and math.isfinite(args.input_std)):
            raise ConvertError("--input-std must be a finite value >= 0")
        if not os.path.isfile(args.checkpoint):
            raise ConvertError(f"{args.checkpoint}: no such file")
        check_notes(args.notes)
        model, fmt, extra = mega_torch.load_checkpoint(args.checkpoint)
        labels, detection = labels_and_detection(args, extra)
        data, logits = build_model_file(
            model, labels, input_mean=args.input_mean, input_std=args.input_std, fp16=args.fp16,
            source_sha256=sha256_of(args.checkpoint), source_format=fmt, notes=args.notes,
            detection=detection)
        write_atomic(args.output, data)
    except (ConvertError, ValueError) as e:
        print(f"mega_convert: error: {e}", file=sys.stderr)
        return 1
    print(summary(model, labels, fmt, len(data), args.fp16, args.input_mean, args.input_std, logits))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
