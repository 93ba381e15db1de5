# SPDX-License-Identifier: Apache-2.0
"""Convert a student (teacher.student's RUN/best.pt: Mega-chunk layers on the
teacher's speech embedding) into a .mega file whose front end is the teacher
(schema 6, PatchFeatures TeacherEmbedding; formats/mega_model.fbs says what a
token reads and names the tensors).

The file holds the teacher's weights (teacher.export, from the fetched ONNX
files), the student's projection with its standardization folded in
(embed_tokens.weight (D, 96), embed_tokens.bias (D)), and the Mega layers,
final norm and classifier under mega_convert's names. Its self-test is one
window of mega_convert's test signal with the logits of student_runtime's
classify_clip in float64; the float16 peaks are measured on the Mega layers
over that clip's embeddings, as for any model.

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.student_convert RUN/best.pt -o MODEL.mega [--teacher DIR]
         [--labels L1,L2,...] [--detection JSON] [--notes TEXT]
It lives here, not in convert/, because convert/ must not import the teacher
(the teacher's judges import evaluation, which imports convert);
mega_convert names this command when given a student's checkpoint.
"""

import argparse
import dataclasses
import os
import sys

import numpy as np
import torch

from mega_kws_tools.convert import fp16_peaks
from mega_kws_tools.convert.mega_convert import (ConvertError, check_detection, check_labels, check_notes,
                                                 file_tensors, labels_and_detection, model_file_bytes,
                                                 self_test_input, summary, write_atomic)
from mega_kws_tools.hashing import sha256_of
from mega_kws_tools.model import MegaConfig
from mega_kws_tools.teacher import export, features, fetch, student, student_runtime

SOURCE_FORMAT = "teacher-student"


def file_config(cfg: MegaConfig) -> MegaConfig:
    """The file's hparams: the student's, a token being 1280 samples read over 13152 by the teacher."""
    return dataclasses.replace(cfg, patch_kernel=student_runtime.TOKEN_SPAN, patch_stride=student_runtime.TOKEN_SAMPLES,
                               patch_features="teacher_embedding")


def student_tensors(folded) -> list:
    """[(name, array)] of a folded student (student_runtime.folded_student): its projection as
    embed_tokens.weight and .bias, then the rest under mega_convert's names."""
    p = folded.embed_tokens.proj
    rest = [(n, a) for n, a in file_tensors(folded) if not n.startswith("embed_tokens.")]
    return [("embed_tokens.weight", p.weight.detach().numpy().copy()),
            ("embed_tokens.bias", p.bias.detach().numpy().copy())] + rest


def build_student_file(model, graphs, labels, *, detection=None, source_sha256="", notes="", fp16_range=True):
    """(.mega bytes, self-test logits) of a student (EmbeddingStudent) over the teacher's graphs
    (melspectrogram, embedding: graph.Graph)."""
    check_labels(labels)
    if len(labels) != model.cfg.n_classes:
        raise ConvertError(f"{len(labels)} labels but the student has {model.cfg.n_classes} classes")
    try:
        check_detection(detection, labels)
    except ConvertError as e:
        raise ConvertError(f"detection defaults: {e}") from None
    try:
        teacher = export.teacher_tensors(*graphs)
    except (KeyError, ValueError) as e:
        raise ConvertError(f"the teacher's graphs do not fit the file: {e}") from None
    cfg = file_config(model.cfg)
    folded = student_runtime.folded_student(model)
    st_input = self_test_input(cfg)
    reference = student_runtime.reference_teacher(*graphs)
    st_logits = student_runtime.classify_clip(folded, reference, st_input)
    peaks = None
    if fp16_range:  # the Mega layers' float16 range over the self-test clip's tokens
        x = np.zeros(student_runtime.padded_clip_samples(cfg, len(st_input)), np.float32)
        x[:len(st_input)] = st_input
        peaks = fp16_peaks.measure(folded, student_runtime.stream_embeddings(reference, x).float())
    data = model_file_bytes(cfg, labels, teacher + student_tensors(folded), (st_input, st_logits), peaks,
                            source_sha256=source_sha256, source_format=SOURCE_FORMAT, notes=notes,
                            detection=detection)
    return data, st_logits


def read_student_file(path, graphs):
    """(EmbeddingStudent in eval mode, labels) of a TeacherEmbedding .mega file (what build_student_file
    writes): its projection as stored (standardization folded in: statistics 0 and 1), the rest by
    mega_convert's names; the file's self-test reproduced with the teacher's graphs. ConvertError if not."""
    from mega_kws_tools.convert import mega_unpack as mu
    from mega_kws_tools.convert.schema import PatchFeatures
    try:
        with open(path, "rb") as f:
            m = mu.open_model(f.read())
        if m.Hparams().PatchFeatures() != PatchFeatures.PatchFeatures.TeacherEmbedding:
            raise mu.UnpackError("its front end is not the teacher's (patch_features teacher_embedding)")
        model = student.EmbeddingStudent(mu.config_of(m, patch_kernel=1, patch_stride=1, patch_features="linear"))
        given = {n: a for n, a in mu.tensors_of(m).items() if not n.startswith("teacher.")}
        w, b = given.pop("embed_tokens.weight", None), given.pop("embed_tokens.bias", None)
        proj = model.embed_tokens.proj
        if w is None or b is None or w.shape != tuple(proj.weight.shape) or b.shape != tuple(proj.bias.shape):
            raise mu.UnpackError(f"embed_tokens.weight/bias missing or not {tuple(proj.weight.shape)}")
        mu.load_tensors(model, given, skip=("embed_tokens.",))
        with torch.no_grad():
            proj.weight.copy_(torch.from_numpy(w))
            proj.bias.copy_(torch.from_numpy(b))
        model.eval()
        st = m.SelfTest()
        logits = student_runtime.classify_clip(model, student_runtime.reference_teacher(*graphs),
                                               st.InputAsNumpy().astype(np.float32))
        err = float(np.max(np.abs(logits - st.ExpectedLogitsAsNumpy())))
        if not err <= st.Tolerance():
            raise mu.UnpackError(f"the rebuilt student misses the file's self-test by {err:.3g}")
    except (OSError, mu.UnpackError) as e:
        raise ConvertError(f"{path}: {e}") from None
    return model, [m.Labels(i).decode() for i in range(m.LabelsLength())]


def load_teacher(folder):
    """The two graphs from folder, each checked against its pinned sha256; ConvertError naming the fetch."""
    try:
        return features.load_graphs(folder)
    except ValueError as e:
        raise ConvertError(f"--teacher {folder}: {e}") from None


def load_student_checkpoint(path):
    """(EmbeddingStudent in eval mode, checkpoint dict) of a student's best.pt (student.load_student)."""
    if not os.path.isfile(path):
        raise ConvertError(f"{path}: no such file")
    try:
        return student.load_student(path)
    except KeyError as e:
        raise ConvertError(f"{path}: not a student's checkpoint (it has no {e}); other checkpoints: "
                           "python3 -m mega_kws_tools.convert.mega_convert") from None
    except ValueError as e:  # a bidirectional student
        raise ConvertError(f"{path}: {e}: a TeacherEmbedding file streams") from None
    except Exception as e:  # pickle, zip and torch errors alike: not a usable checkpoint
        raise ConvertError(f"{path}: cannot read the checkpoint ({type(e).__name__}: {e})") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="a student's best.pt (teacher.student_run)")
    ap.add_argument("-o", "--output", required=True, help="output .mega file")
    ap.add_argument("--teacher", default=fetch.DEFAULT_OUT,
                    help="folder of the teacher's ONNX files (default: %(default)s; python3 -m mega_kws_tools.teacher.fetch)")
    ap.add_argument("--labels", help="comma-separated labels in class order (default: the checkpoint's)")
    ap.add_argument("--notes", default="", help="free text stored in the file's provenance")
    ap.add_argument("--detection", help="JSON file with detection defaults: "
                    '{"thresholds": [per label], "smoothing_hops": N, "refractory_ms": MS}')
    args = ap.parse_args(argv)
    try:
        check_notes(args.notes)
        model, ck = load_student_checkpoint(args.checkpoint)
        labels, detection = labels_and_detection(args, ck)
        graphs = load_teacher(args.teacher)
        data, logits = build_student_file(model, graphs, labels, detection=detection,
                                          source_sha256=sha256_of(args.checkpoint), notes=args.notes)
        write_atomic(args.output, data)
    except (ConvertError, ValueError) as e:
        print(f"student_convert: error: {e}", file=sys.stderr)
        return 1
    cfg = file_config(model.cfg)
    n_teacher = sum(a.size for _, a in export.teacher_tensors(*graphs))
    n_params = n_teacher + sum(a.size for _, a in student_tensors(student_runtime.folded_student(model)))
    front = (f"the teacher's melspectrogram and speech embedding ({args.teacher}), 96 values per token, "
             f"then a linear map to {cfg.embed_dim}; a token every {cfg.patch_stride} samples reads {cfg.patch_kernel}")
    print(summary(model, labels, SOURCE_FORMAT, len(data), False, None, None, logits,
                  front_end=(cfg, f"{n_params}, {n_teacher} of them the teacher's", front)))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
