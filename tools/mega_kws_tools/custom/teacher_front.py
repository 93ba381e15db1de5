# SPDX-License-Identifier: Apache-2.0
"""--front-end teacher: the custom keyword learned on the pretrained teacher's
frozen speech embedding (Google's, through openWakeWord's melspectrogram;
mega_kws_tools.teacher), the model written as the runtime runs it (schema 6,
PatchFeatures TeacherEmbedding: teacher.student_convert).

What an example is here: the teacher's embeddings of the STEPS tokens ending
at its last hop, a token every 1280 samples reading the 13152 before it, the
stream's zeros before its first sample (teacher.student_runtime's
stream_embeddings, which the runtime matches). On them the bundled teacher
model's student (models/sc10-teacher.mega: a projection, two Mega-chunk
layers, the mean over the last 4 chunks of 3 tokens, a head; trained on real
people's ten keywords) with a new projection onto the new labels is trained
whole, from those weights. Its reach (receptive_steps, 24 tokens) is all its
posterior at a hop depends on, so a window of the last STEPS tokens gives
exactly what a stream gives there, and the extra token lets training shift
each window by one.

Measured on `bed` (docs/custom-keywords.md): from the bundled student's
weights, 38.8% of the validation speakers' clips at 0.9 false alarms an hour;
the same student started from random weights learns the synthetic voices
and finds 17-28%; the bundled layers frozen with only a new head, 9%.
"""

import numpy as np
import torch
import torch.nn.functional as F

import copy

from mega_kws_tools.custom.head import optimize
from mega_kws_tools.teacher import features, stream_embed, student, student_convert, student_runtime

SR = 16000
TOKEN = student_runtime.TOKEN_SAMPLES  # 1280
STEPS = 25          # tokens kept per hop: the student's reach and one more to shift by
PAD_TOKENS = 27     # zeros before a sequence (whole chunks, >= STEPS): the stream's silence before it
BATCH = 32
LR, WEIGHT_DECAY, TRAIN_BATCH = 1e-3, 1e-2, 128


class TeacherFront:
    name = "teacher"

    def __init__(self, folder: str, backbone: str, graphs=None):
        """folder: the teacher's checked files; graphs: the (melspectrogram, embedding) graphs themselves
        instead (tests). backbone: a TeacherEmbedding .mega file whose student the new model starts from.
        ValueError (naming the fetch, or the file and why) if either cannot be had."""
        try:
            self.graphs = graphs if graphs is not None else features.load_graphs(folder)
        except ValueError as e:
            raise ValueError(f"--teacher {folder}: {e}") from None
        try:
            self.start, _ = student_convert.read_student_file(backbone, self.graphs)
        except student_convert.ConvertError as e:
            raise ValueError(f"--backbone {e}") from None
        cfg = self.start.cfg
        self.embedder = stream_embed.StepFloorEmbedder(features.Teacher(*self.graphs))
        self.reach, self.chunk = student.receptive_steps(cfg), cfg.chunk_size
        if self.reach >= STEPS or PAD_TOKENS % self.chunk or PAD_TOKENS < STEPS:
            raise ValueError(f"--backbone {backbone}: its student reads {self.reach} tokens, more than {STEPS - 1}")
        self.hop_s = self.chunk * TOKEN / SR
        self.window_chunks = cfg.window_chunks
        self.cache_key = f"teacher-v1-{STEPS}"  # load_graphs checks each file's pinned sha256
        self.description = (f"the pretrained teacher's melspectrogram and speech embedding (frozen) with the "
                            f"Mega-chunk layers of {backbone.rsplit('/', 1)[-1]} trained on and a new head")

    # ------------------------------------------------------------------ embeddings
    def tokens(self, audio: np.ndarray) -> np.ndarray:
        """Float audio (B, T) -> (B, T // 1280, 96) float32: token t reads the 13152 samples ending at
        1280 (t + 1), zeros before the start; clipped and cleaned as the runtime's input hygiene."""
        x = np.asarray(audio, np.float32)
        x = np.where(np.isfinite(x), np.clip(x, -1.0, 1.0), 0.0) * np.float32(features.SAMPLE_SCALE)
        x = np.concatenate([np.zeros((len(x), student_runtime.LEAD), np.float32), x], axis=1)
        with torch.no_grad():
            return self.embedder(torch.from_numpy(x)).numpy()

    def embed_last(self, audio, progress=None):
        out = []
        for i in range(0, len(audio), BATCH):
            out.append(self.tokens(audio[i:i + BATCH])[:, -STEPS:].astype(np.float16))
            if progress:
                progress(min(len(audio), i + BATCH))
        return np.concatenate(out) if out else np.zeros((0, STEPS, 96), np.float16)

    def hop_embeddings(self, audio, dtype=np.float16):
        """(M, hops, STEPS, 96): at each whole chunk of each sequence, the tokens ending there (silence
        before the sequence, as a stream that starts with it has). Stored as float16, as every example
        is here (half the memory; 1e-3 of the posteriors at most, tests/tools/test_custom_teacher.py)."""
        if not len(audio):
            return np.zeros((0, 0, STEPS, 96), dtype)
        pad = np.zeros((len(audio), PAD_TOKENS * TOKEN), np.float32)
        out = []
        for i in range(0, len(audio), BATCH):
            e = self.tokens(np.concatenate([pad[i:i + BATCH], audio[i:i + BATCH]], axis=1))
            ends = range(PAD_TOKENS + self.chunk, e.shape[1] + 1, self.chunk)
            out.append(np.stack([e[:, end - STEPS:end] for end in ends], axis=1).astype(dtype))
        return np.concatenate(out)

    def speech_hops(self, speech, progress=None, block=4800):
        """Every hop of a long recording heard as one stream from its start: (hops, STEPS, 96) and each
        hop's end in seconds (the first hops, before STEPS tokens, left out)."""
        x = np.concatenate([np.zeros(student_runtime.LEAD, np.float32),
                            np.clip(speech, -1.0, 1.0) * np.float32(features.SAMPLE_SCALE)])
        total = len(speech) // TOKEN
        parts = []
        for k0 in range(0, total, block):
            k1 = min(total, k0 + block)
            seg = x[k0 * TOKEN:(k1 - 1) * TOKEN + student_runtime.TOKEN_SPAN]
            parts.append(stream_embed.recording_embeddings(self.embedder, seg))
            if progress:
                progress(k1 / max(1, total))
        e = np.concatenate(parts) if parts else np.zeros((0, 96), np.float32)
        ends = np.arange(STEPS + (-STEPS) % self.chunk, len(e) + 1, self.chunk)
        windows = np.stack([e[end - STEPS:end] for end in ends]).astype(np.float16) if len(ends) else \
            np.zeros((0, STEPS, 96), np.float16)
        return windows, ends * TOKEN / SR

    # ------------------------------------------------------------------ the model
    def new_model(self, n_classes):
        """The backbone's student with a new projection onto n_classes."""
        model = copy.deepcopy(self.start)
        model.cfg = copy.deepcopy(self.start.cfg)
        model.cfg.n_classes = n_classes
        model.sentence_projection_layer = torch.nn.Linear(model.cfg.classifier_dim, n_classes, bias=False)
        return model

    def _window(self, x, shift=0):
        return x[:, STEPS - self.reach - shift:STEPS - shift]

    def train(self, model, emb, y, weights, steps, seed, progress=None):
        """The whole student (projection, layers, head), examples drawn in proportion to weights; each
        window ends at its example's last token or the one before."""
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        restandardize(model.embed_tokens, emb[rng.choice(len(emb), min(len(emb), 4000), replace=False)])
        opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
        p_draw = weights / weights.sum()
        y_all = torch.from_numpy(y)
        model.train()

        def loss():
            idx = rng.choice(len(y), size=TRAIN_BATCH, p=p_draw)
            half = TRAIN_BATCH // 2
            x = np.concatenate([self._window(emb[idx[:half]]), self._window(emb[idx[half:]], 1)])
            return F.cross_entropy(model(torch.from_numpy(x.astype(np.float32))), y_all[idx], label_smoothing=0.05)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # small matmuls: a step took 75 ms on one thread, 148 ms on two (quiet machine)
        try:
            optimize(opt, LR, steps, loss, progress)
        finally:
            torch.set_num_threads(threads)
        return model.eval()

    def posteriors(self, model, emb):
        """Posteriors (..., n_classes) float64 of windows (..., STEPS, 96): the stream's at those hops."""
        flat = emb.reshape(-1, STEPS, emb.shape[-1])
        out = []
        model.eval()
        with torch.no_grad():
            for i in range(0, len(flat), 512):
                x = torch.from_numpy(self._window(flat[i:i + 512]).astype(np.float32))
                out.append(torch.softmax(model(x).double(), dim=-1).numpy())
        probs = np.concatenate(out) if out else np.zeros((0, model.cfg.n_classes))
        return probs.reshape(emb.shape[:-2] + (model.cfg.n_classes,))

    def write(self, run, model, detection, out, notes):
        from mega_kws_tools.convert.mega_convert import write_atomic
        from mega_kws_tools.teacher.student_convert import build_student_file
        data, _ = build_student_file(model, self.graphs, run.labels + ["_silence_", "_unknown_"],
                                     detection=detection, notes=notes)
        write_atomic(out, data)


def restandardize(p, x):
    """The projection p (student.StepProjection) given the statistics of x (..., 96) without changing
    what it computes: W (e - m) / s + b kept for the new m, s. The optimizer then steps in the units
    the student was trained in, not those of the file's folded map."""
    m0, s0 = p.mean.clone().double(), p.std.clone().double()
    w0, b0 = p.proj.weight.detach().double(), p.proj.bias.detach().double()
    p.set_statistics(np.asarray(x, np.float32))
    m1, s1 = p.mean.double(), p.std.double()
    with torch.no_grad():
        p.proj.weight.copy_((w0 * (s1 / s0)[None, :]).float())
        p.proj.bias.copy_((b0 + w0 @ ((m1 - m0) / s0)).float())
