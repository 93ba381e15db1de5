# SPDX-License-Identifier: Apache-2.0
"""An exponential moving average of the weights (--weight-average)."""

import contextlib

import torch


class WeightAverage:
    """An exponential moving average of a model's weights and BatchNorm
    statistics (--weight-average): after each optimizer step,
    avg <- d * avg + (1 - d) * current, with d = min(decay, (1 + n) / (10 + n))
    at the n-th update so that the starting weights fade out early. Integer
    buffers (BatchNorm's step counters) are copied."""

    def __init__(self, model, decay: float):
        self.decay, self.n = decay, 0
        self.avg = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def state_dict(self) -> dict:  # the decay is the run's --weight-average, kept with its args
        return {"avg": self.avg, "n": self.n}

    def load_state_dict(self, state: dict):
        if state.keys() != {"avg", "n"} or state["avg"].keys() != self.avg.keys():
            raise ValueError("the checkpoint's weight average does not fit this model")
        self.avg, self.n = state["avg"], state["n"]

    @torch.no_grad()
    def update(self, model):
        self.n += 1
        d = min(self.decay, (1 + self.n) / (10 + self.n))
        for k, v in model.state_dict().items():
            a = self.avg[k]
            if a.is_floating_point():
                a.mul_(d).add_(v.detach(), alpha=1 - d)
            else:
                a.copy_(v)

    @contextlib.contextmanager
    def applied(self, model):
        """The model holds the averaged weights inside the block, its own after."""
        own = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(self.avg)
        try:
            yield
        finally:
            model.load_state_dict(own)
