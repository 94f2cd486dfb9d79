"""The GPU primer's tiny CNN (notebook 00, re-exported by :mod:`fightlab.measure.primer`): one
training step of a small convolutional network in torch on the handwritten-digits data set, timed
per device with the primer's warm-up / synchronise discipline (:mod:`fightlab.timing`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from fightlab import timing

__all__ = ["load_digits", "TinyCNN", "cnn_study"]


def load_digits(image_px: int = 8, *, seed: int = 0, test_fraction: float = 0.2) -> dict[str, Any]:
    """The handwritten digits (UCI optdigits, 1797 8x8 images, 10 classes) as torch tensors.

    Taken from scikit-learn (``sklearn.datasets.load_digits``, shipped inside the package, no
    download); ``source`` names it.

    Args:
        image_px: side of the images handed to the CNN (bilinear upsampling from 8x8;
            the article used 64x64 inputs).
        seed: train/test split seed.
        test_fraction: share held out for the test accuracy.

    Returns:
        ``{"x_train", "y_train", "x_test", "y_test"`` (float32 ``[N, 1, px, px]`` in [0, 1] and
        int64 ``[N]``), ``"source"``, ``"n_classes"``}.
    """
    from sklearn.datasets import load_digits as _sk_digits

    d = _sk_digits()
    images, labels = d.images.astype(np.float32) / 16.0, d.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    n_test = int(round(test_fraction * len(labels)))
    x = torch.from_numpy(images[order]).unsqueeze(1)
    if image_px != x.shape[-1]:
        x = F.interpolate(x, size=(image_px, image_px), mode="bilinear", align_corners=False)
    y = torch.from_numpy(labels[order])
    return {
        "x_train": x[n_test:].contiguous(), "y_train": y[n_test:].contiguous(),
        "x_test": x[:n_test].contiguous(), "y_test": y[:n_test].contiguous(),
        "source": "scikit-learn digits (UCI optdigits, handwritten)", "n_classes": 10,
    }


class TinyCNN(nn.Module):
    """The primer's CNN: conv3x3(1->w) ReLU pool2, conv3x3(w->2w) ReLU pool2, linear -> classes."""

    def __init__(self, image_px: int = 8, n_classes: int = 10, width: int = 16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(2 * width * (image_px // 4) ** 2, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [B, 1, px, px] -> logits [B, n_classes]
        return self.head(self.features(x).flatten(1))


def cnn_study(data: dict[str, Any], devices: Sequence[str], *, batch: int = 32, train_steps: int = 300,
              repeats: int = 20, warmup: int = 3, seed: int = 0, lr: float = 1e-3) -> pd.DataFrame:
    """Time one training step (forward, cross-entropy, backward, Adam) of :class:`TinyCNN` per device.

    On each device: a fresh model (same seed), data moved to the device once, batches taken in
    order from the training set. The step is measured synchronised and unsynchronised
    (:func:`fightlab.timing.compare_sync`; the first step, with cuDNN/allocator set-up, apart), then
    the model trains ``train_steps`` more steps and is scored on the test set -- a model that
    learns proves the steps ran.

    Returns:
        One row per device: ``device, batch, image_px, first_s, step_s, step_iqr_s,
        unsynced_step_s, samples_per_s, final_loss, test_accuracy, torch_threads``.
    """
    rows = []
    for dev in devices:
        tdev = torch.device(dev)
        torch.manual_seed(seed)
        px = data["x_train"].shape[-1]
        model = TinyCNN(px, data["n_classes"]).to(tdev)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        x_train, y_train = data["x_train"].to(tdev), data["y_train"].to(tdev)
        n = x_train.shape[0]
        state = {"k": 0, "loss": None}

        def step() -> None:
            i = (state["k"] * batch) % max(1, n - batch + 1)
            state["k"] += 1
            xb, yb = x_train[i:i + batch], y_train[i:i + batch]  # [B, 1, px, px], [B]
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            state["loss"] = loss  # stays on the device: reading it would synchronise

        right, wrong = timing.compare_sync(step, device=dev, warmup=warmup, repeats=repeats,
                                           name=f"cnn step {dev}")
        for _ in range(train_steps):
            step()
        model.eval()
        with torch.no_grad():
            pred = model(data["x_test"].to(tdev)).argmax(1).cpu()
        rows.append({
            "device": dev, "batch": batch, "image_px": px, "first_s": right.first_s,
            "step_s": right.median_s, "step_iqr_s": right.iqr_s, "unsynced_step_s": wrong.median_s,
            "samples_per_s": right.rate(batch), "final_loss": float(state["loss"].item()),
            "test_accuracy": float((pred == data["y_test"]).float().mean()),
            "torch_threads": torch.get_num_threads(),
        })
    return pd.DataFrame(rows)
