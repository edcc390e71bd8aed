"""What a run writes besides the weights: resumable checkpoints, the loss CSV, its plot, the exported model."""

from __future__ import annotations

import csv
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.model import ModelArgs
from waferline.engine.tokenizer import Tokenizer

CSV_FIELDS = ["step", "tokens", "elapsed_s", "lr", "train_loss", "val_loss", "val_dist_loss", "tok_s"]


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """torch.save to a temporary sibling then rename: a crash mid-write never leaves a torn checkpoint."""
    tmp = path.with_name(path.name + ".tmp")
    torch.save(dict(state), tmp)
    os.replace(tmp, path)


def load_state(path: Path) -> dict[str, Any] | None:
    """A checkpoint or a run's rows, or None when absent.

    weights_only=True: torch's restricted unpickler, which builds tensors, containers and numbers but no arbitrary
    object, so a checkpoint handed over from elsewhere cannot run code when it is loaded. A file that holds more
    than that is refused with a clear error naming it instead of being trusted.
    """
    if not path.is_file():
        return None
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise ValueError(f"{path}: not a plain checkpoint (tensors, numbers, strings, containers): {e}") from None
    except (RuntimeError, EOFError) as e:  # torch's words for a truncated or foreign file
        raise ValueError(f"{path}: not a checkpoint torch.save wrote ({e})") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: a checkpoint is a dict, got {type(loaded).__name__}")
    return loaded


def append_csv(path: Path, row: Mapping[str, Any]) -> None:
    new = not path.is_file()
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in CSV_FIELDS})


def truncate_csv(path: Path, step: int) -> None:
    """Drop rows past `step` (a resumed run recomputes them)."""
    if not path.is_file():
        return
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["step"]) <= step]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        w.writerows(rows)


def plot_losses(csv_path: Path, png_path: Path) -> None:
    """Training loss (smoothed) and held-out loss against tokens seen, as a PNG (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return
    tokens = [int(r["tokens"]) / 1e6 for r in rows]
    train = [float(r["train_loss"]) for r in rows]
    val = [(int(r["tokens"]) / 1e6, float(r["val_loss"])) for r in rows if r["val_loss"]]
    val_dist = [(int(r["tokens"]) / 1e6, float(r["val_dist_loss"])) for r in rows if r.get("val_dist_loss")]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(tokens, train, lw=1, label="train (per logged step)")
    if val:
        ax.plot([v[0] for v in val], [v[1] for v in val], "o-", label="held-out files")
    if val_dist:
        ax.plot([v[0] for v in val_dist], [v[1] for v in val_dist], "s-", label="held-out distributions")
    ax.set_xlabel("tokens seen (millions)")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title("waferline-mini training")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = png_path.with_name(png_path.name + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, png_path)


def export_model(directory: Path, args: ModelArgs, state: Mapping[str, torch.Tensor], tokenizer: Tokenizer) -> Path:
    """A Hugging Face directory (float32 safetensors, config, tokenizer) that waferline and transformers load."""
    return save_checkpoint(
        directory,
        args,
        dict(state),
        tokenizer_json=tokenizer.to_str(),
        fim_template="waferline",
        dtype="float32",
        overwrite=True,
    )
