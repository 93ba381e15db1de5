# SPDX-License-Identifier: Apache-2.0
"""Domain-adversarial training against the voice (--voice-adversary)."""

import torch


class _ReversedGradient(torch.autograd.Function):
    """Identity forward; the gradient times -scale backward."""

    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.scale * grad, None


class VoiceAdversary(torch.nn.Module):
    """--voice-adversary: a small classifier that names the voice of a clip from the
    window embedding the keyword head reads (MegaKWS.window_embedding), trained
    through a reversed gradient (domain-adversarial training): it learns to tell the
    voices apart while the encoder is pushed, with weight `scale`, to make them
    impossible to tell apart. Training only: it is not part of the model file."""

    LR_SCALE = 10.0  # it starts from nothing beside a fine-tuned encoder: a faster rate than the model's

    def __init__(self, dim: int, names, hidden: int = 128):
        super().__init__()
        self.names = list(names)
        self.net = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, len(self.names)))

    def forward(self, embedding: torch.Tensor, scale: float) -> torch.Tensor:
        return self.net(_ReversedGradient.apply(embedding, scale))


def adversary_scale(weight: float, ramp: int, step: int) -> float:
    """The reversed gradient's weight at `step` (0-based): 0 at the first step, rising
    linearly to `weight` over `ramp` steps, so the adversary first learns the voices."""
    return weight * min(1.0, step / ramp) if ramp > 0 else weight
