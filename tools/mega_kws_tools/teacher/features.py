# SPDX-License-Identifier: Apache-2.0
"""Audio -> the teacher's embeddings, as openWakeWord computes them
(openwakeword/utils.py, AudioFeatures: _get_melspectrogram, _get_embeddings):

- the melspectrogram graph takes 16 kHz samples as int16 values in float32
  (not scaled to +-1), and gives a frame of 32 mel bands every 160 samples
  (10 ms) from 512 samples, no padding; its log-mel values are floored 80 dB
  under the clip's maximum;
- openWakeWord then scales each value x -> x / 10 + 2 ("closer to the native
  TensorFlow implementation from Google");
- the embedding graph takes windows of 76 frames (0.775 s) every 8 frames
  (80 ms, 1280 samples) and gives 96 values for each; a window that would run
  past the last frame is left out.

Teacher is a frozen torch module over the two ported graphs (torch_port);
Teacher.load(folder) checks each file's pinned sha256 first (fetch)."""

import os

import torch

from mega_kws_tools.teacher import fetch, graph, torch_port

SAMPLE_SCALE = 32768.0  # float audio in [-1, 1) -> the int16 values the graph was exported for
N_FFT = 512
HOP = 160
N_MEL = 32
WINDOW_FRAMES = 76
STEP_FRAMES = 8
SAMPLES_PER_EMBEDDING = STEP_FRAMES * HOP  # 1280: openWakeWord's 80 ms step
N_EMBEDDING = 96
MEL_NAME, EMBEDDING_NAME = "melspectrogram.onnx", "embedding_model.onnx"


def scale_mel(x):
    """openWakeWord's transform of the graph's log-mel output."""
    return x / 10 + 2


def n_frames(n_samples: int) -> int:
    return max(0, (n_samples - N_FFT) // HOP + 1)


def n_embeddings(n_samples: int) -> int:
    return max(0, (n_frames(n_samples) - WINDOW_FRAMES) // STEP_FRAMES + 1)


def load_graphs(folder: str = fetch.DEFAULT_OUT, verify: bool = True):
    """(melspectrogram graph, embedding graph) from `folder`, each file checked against its pinned sha256."""
    paths = [os.path.join(folder, name) for name in (MEL_NAME, EMBEDDING_NAME)]
    if verify:
        for path in paths:
            fetch.check_file(path, fetch.TEACHER_FILES[os.path.basename(path)])
    return tuple(graph.load(path) for path in paths)


class Teacher(torch.nn.Module):
    """audio [B, N] (int16 values as float) -> embeddings [B, n_embeddings(N), 96]; frozen."""

    def __init__(self, mel_graph, embedding_graph):
        super().__init__()
        # per_item_max: each clip floored under its own maximum, as when openWakeWord runs it alone;
        # float64: the STFT's sums cancel below float32's rounding (torch_port)
        self.mel = torch_port.PortedGraph(mel_graph, per_item_max=True, dtype=torch.float64)
        self.embedding = torch_port.PortedGraph(embedding_graph)
        self.requires_grad_(False)
        self.eval()

    @classmethod
    def load(cls, folder: str = fetch.DEFAULT_OUT) -> "Teacher":
        return cls(*load_graphs(folder))

    def melspectrogram(self, audio: torch.Tensor) -> torch.Tensor:
        """[B, N] -> scaled log-mel frames [B, n_frames(N), 32]."""
        if audio.dim() != 2 or audio.shape[1] < N_FFT:
            raise ValueError(f"audio must be [batch, samples] with at least {N_FFT} samples, got {list(audio.shape)}")
        return scale_mel(self.mel(audio.to(torch.float64))[:, 0]).float()

    def embed(self, mel: torch.Tensor) -> torch.Tensor:
        """Scaled log-mel frames [B, T, 32] -> embeddings [B, K, 96], one per 76-frame window every 8 frames."""
        if mel.dim() != 3 or mel.shape[1] < WINDOW_FRAMES or mel.shape[2] != N_MEL:
            raise ValueError(f"mel frames must be [batch, >= {WINDOW_FRAMES}, {N_MEL}], got {list(mel.shape)}")
        windows = mel.unfold(1, WINDOW_FRAMES, STEP_FRAMES)  # [B, K, 32, 76]
        b, k = windows.shape[:2]
        x = windows.permute(0, 1, 3, 2).reshape(b * k, WINDOW_FRAMES, N_MEL, 1)  # the graph's NHWC input
        return self.embedding(x).reshape(b, k, -1)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.embed(self.melspectrogram(audio))

    @staticmethod
    def from_float(audio: torch.Tensor) -> torch.Tensor:
        """Float audio in [-1, 1) (the project's scale) -> the int16 values the teacher takes."""
        return audio * SAMPLE_SCALE
