"""The training loop: AdamW with warmup and a cosine schedule, clipping, resumable checkpoints, a loss CSV and plot.

A run lives in one directory (default runs/waferline-mini, git-ignored): tokenizer.json, rows.pt (the packed token
rows), ckpt.pt (model, optimizer, step, elapsed seconds), loss.csv, loss.png, and export/ (a Hugging Face model
directory written at every checkpoint, so a run stopped at any point still leaves a usable model).
With a wall-clock budget (`max_minutes`) the schedule runs on elapsed training time instead of steps: the learning
rate reaches its floor exactly when the budget ends, however fast the shared machine happens to be.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from waferline.engine.hf import args_from_hf_config
from waferline.engine.model import ModelArgs
from waferline.engine.tokenizer import Tokenizer
from waferline.training.artifacts import append_csv, export_model, load_state, plot_losses, save_state, truncate_csv
from waferline.training.bpe import VOCAB_SIZE, chars_per_token, train_tokenizer
from waferline.training.data import HELD_OUT_PERCENT, Corpus, load_corpus
from waferline.training.dataset import ExampleConfig, RowSampler, build_examples, compact, pack_flags, pack_rows
from waferline.training.grow import args_differ, grow_state_dict
from waferline.training.model import TrainableLM

log = logging.getLogger("waferline.training")


@dataclass(kw_only=True)
class TrainConfig:
    out_dir: Path = Path("runs/waferline-mini")
    preset: str = "tiny"
    seq_len: int = 1024
    batch_size: int = 4
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 30
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    max_steps: int = 100_000
    max_minutes: float | None = None
    seed: int = 1234
    fim_rate: float = 0.5
    passes: int = 1  # times the corpus is drawn into examples (each with fresh FIM choices)
    compile: bool = False  # torch.compile the loss (about 30 s to compile; 1.25x faster on these CPUs)
    checkpoint_minutes: float = 10.0
    log_every: int = 10
    val_rows: int = 8
    autocast: str = "auto"  # "auto" (bfloat16 on CUDA and on CPUs with native bf16, e.g. AVX512-BF16), "on", "off"
    threads: int = 2
    max_files: int | None = None  # limit the corpus (tests)
    corpus_root: Path | None = None  # default: the interpreter's standard library
    third_party: Path | None = None  # a folder training.corpus.build wrote: its files join the stdlib's
    max_dist_mb: float | None = 4.0  # training text taken from one third-party distribution at most (MB)
    held_out_percent: int = HELD_OUT_PERCENT
    vocab_size: int = VOCAB_SIZE
    init_from: Path | None = None  # start from these weights (a model directory) instead of random ones
    fim_files: int | None = None  # draw the FIM and plain examples from this many training files (at random)
    # The next-edit objective (training/next_edit_mix.py): rename rows from this many training files, commit rows
    # from these git directories (this many changed files of each at most); 0 files and no git dirs: off.
    next_edit_files: int = 0
    next_edit_git: tuple[Path, ...] = ()
    next_edit_per_repo: int = 150
    extra: dict[str, Any] = field(default_factory=dict)

    def model_args(self) -> ModelArgs:
        args = ModelArgs.from_name(self.preset)
        args.max_seq_len = self.seq_len  # RoPE positions the model was trained on; the engine refuses longer prompts
        args.vocab_size = self.vocab_size
        return args


def lr_at(cfg: TrainConfig, step: int, progress: float) -> float:
    """Linear warmup over warmup_steps, then cosine from lr to lr * min_lr_ratio as progress goes 0 -> 1."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    cos = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos)


def initial_weights(model_dir: Path, args: ModelArgs, seed: int = 0) -> dict[str, torch.Tensor]:
    """The weights of `model_dir` for a model of shape `args`: as they are, or grown (training/grow.py) when `args`
    is a larger shape. Raises GrowthError (a ValueError) when they fit neither way."""
    weights = load_file(str(model_dir / "model.safetensors"))
    src = args_from_hf_config(json.loads((model_dir / "config.json").read_text()))
    if not args_differ(src, args):
        log.info("weights initialised from %s", model_dir)
        return weights
    grown = grow_state_dict(src, weights, args, seed=seed)
    log.info("weights grown from %s (%.2fM -> %.2fM parameters)", model_dir, src.n_params / 1e6, args.n_params / 1e6)
    return grown


def load_training_corpus(cfg: TrainConfig) -> Corpus:
    corpus = load_corpus(cfg.corpus_root, max_files=cfg.max_files, percent=cfg.held_out_percent)
    if cfg.third_party is not None:
        cap = int(cfg.max_dist_mb * 1e6) if cfg.max_dist_mb is not None else None
        corpus.add_third_party(cfg.third_party, cap)
    return corpus


def held_out_rows(files: list[Any], tokenizer: Tokenizer, cfg: TrainConfig, seed: int) -> Any:
    """Up to val_rows rows of held-out examples (none when the files do not fill one row)."""
    examples, _ = build_examples(files, tokenizer, ExampleConfig(seq_len=cfg.seq_len, fim_rate=cfg.fim_rate), seed)
    if sum(len(e) for e in examples) > cfg.seq_len:
        return pack_rows(examples, cfg.seq_len)[: cfg.val_rows]
    return torch.zeros((0, cfg.seq_len + 1), dtype=torch.int64)


def prepare_data(cfg: TrainConfig) -> tuple[Tokenizer, Any, Any, dict[str, Any]]:
    """Tokenizer (trained once per run directory), training rows and held-out rows, cached in the run directory.

    The held-out rows are a dict: "files" (whole files of the training distributions) and, with a third-party
    corpus, "dists" (whole distributions no file of which was trained on). With the next-edit objective the info
    holds "loss_mask" too (which targets the loss counts), popped by `train`.
    """
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    tok_path, rows_path = cfg.out_dir / "tokenizer.json", cfg.out_dir / "rows.pt"
    corpus: Corpus | None = None
    if not tok_path.is_file():
        corpus = load_training_corpus(cfg)
        t0 = time.time()
        raw = train_tokenizer((f.text for f in corpus.train), cfg.vocab_size)
        raw.save(str(tok_path) + ".tmp")
        os.replace(str(tok_path) + ".tmp", tok_path)
        log.info("tokenizer: %d tokens trained in %.0f s", raw.get_vocab_size(), time.time() - t0)
    tokenizer = Tokenizer.from_file(tok_path)
    saved = load_state(rows_path)
    if saved is not None:
        val = saved["val"] if isinstance(saved["val"], dict) else {"files": saved["val"]}
        info = dict(saved["info"])
        if saved.get("train_mask") is not None:
            info["loss_mask"] = saved["train_mask"]
        return tokenizer, saved["train"], {k: v.long() for k, v in val.items()}, info
    corpus = corpus or load_training_corpus(cfg)
    ex_cfg = ExampleConfig(seq_len=cfg.seq_len, fim_rate=cfg.fim_rate, passes=cfg.passes)
    t0 = time.time()
    fim_source = corpus.train
    if cfg.fim_files is not None and cfg.fim_files < len(fim_source):
        import random

        fim_source = sorted(random.Random(cfg.seed).sample(list(fim_source), cfg.fim_files), key=lambda f: f.rel_path)
    examples, counts = build_examples(fim_source, tokenizer, ex_cfg, cfg.seed)
    train_mask = None
    if cfg.next_edit_files or cfg.next_edit_git:
        examples, train_mask, ne_counts = _with_next_edit(examples, corpus, tokenizer, cfg)
        counts = {**counts, **{f"next-edit {k}": v for k, v in ne_counts.items()}}
    train_rows = pack_rows(examples, cfg.seq_len)
    val_rows = {"files": held_out_rows(corpus.held_out, tokenizer, cfg, cfg.seed + 1)}
    if corpus.held_out_dists:
        val_rows["dists"] = held_out_rows(corpus.held_out_dists, tokenizer, cfg, cfg.seed + 2)
    info = {
        "train_files": len(corpus.train),
        "held_out_files": len(corpus.held_out),
        "held_out_distribution_files": len(corpus.held_out_dists),
        "skipped": dict(corpus.skipped),
        "train_tokens": int(train_rows.numel()),
        "example_kinds": counts,
        "held_out_chars_per_token": chars_per_token(tokenizer._tk, (f.text for f in corpus.held_out)),
    }
    log.info("examples built in %.0f s: %s", time.time() - t0, info)
    stored = {"train": compact(train_rows), "val": {k: compact(v) for k, v in val_rows.items()}, "info": info}
    if train_mask is not None:
        stored["train_mask"] = train_mask
        info = {**info, "loss_mask": train_mask}
    torch.save(stored, str(rows_path) + ".tmp")
    os.replace(str(rows_path) + ".tmp", rows_path)
    return tokenizer, train_rows, val_rows, info


def _with_next_edit(examples: list[list[int]], corpus: Corpus, tokenizer: Tokenizer,
                    cfg: TrainConfig) -> tuple[list[list[int]], Any, dict[str, int]]:  # fmt: skip
    """The FIM examples and the next-edit ones in one seeded random order, and the packed loss mask."""
    import random

    from waferline.training.fim import FimIds
    from waferline.training.next_edit_mix import gather_rows, next_edit_example

    t0 = time.time()
    rows, counts = gather_rows(corpus.train, cfg.next_edit_files, cfg.next_edit_git, cfg.next_edit_per_repo,
                               cfg.seed)  # fmt: skip
    ids = FimIds.of(tokenizer)
    made = [next_edit_example(tokenizer, ids, r, cfg.seq_len) for r in rows]
    both: list[tuple[list[int], list[bool]]] = [(e, [True] * len(e)) for e in examples] + made
    random.Random(cfg.seed + 7).shuffle(both)
    ne_tokens, fim_tokens = sum(len(t) for t, _ in made), sum(len(e) for e in examples)
    log.info("next-edit: %d rows (%d tokens) mixed with %d FIM examples (%d tokens) in %.0f s: %s", len(made),
             ne_tokens, len(examples), fim_tokens, time.time() - t0, counts)  # fmt: skip
    return [t for t, _ in both], pack_flags([f for _, f in both], cfg.seq_len), counts


def pick_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (oneDNN's check); emulated bf16 is slower than float32."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def autocast_enabled(cfg: TrainConfig, device: torch.device) -> bool:
    """bfloat16 autocast: 1.4x the float32 tokens/s on this project's AVX512-BF16 CPUs (docs/model-card.md)."""
    return cfg.autocast == "on" or (cfg.autocast == "auto" and (device.type == "cuda" or cpu_has_bf16()))


def autocast_context(cfg: TrainConfig, device: torch.device) -> Any:
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast_enabled(cfg, device))


@torch.no_grad()
def val_loss(model: TrainableLM, rows: torch.Tensor, cfg: TrainConfig, device: torch.device) -> float:
    model.eval()
    total = 0.0
    for i in range(0, rows.shape[0], cfg.batch_size):
        batch = rows[i : i + cfg.batch_size].to(device)  # (B, seq_len + 1)
        with autocast_context(cfg, device):
            total += model.loss(batch[:, :-1], batch[:, 1:]).item() * batch.shape[0]
    model.train()
    return total / rows.shape[0] if rows.shape[0] else float("nan")


def train(cfg: TrainConfig, *, resume: bool = True, progress: bool = True) -> dict[str, Any]:
    """Run (or resume) training in cfg.out_dir; returns a summary (steps, tokens, minutes, losses, export path)."""
    torch.manual_seed(cfg.seed)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = pick_device()
    tokenizer, train_rows, val_rows, info = prepare_data(cfg)
    loss_mask = info.pop("loss_mask", None)
    args = cfg.model_args()
    assert tokenizer.vocab_size <= args.vocab_size, f"tokenizer has {tokenizer.vocab_size} > {args.vocab_size} ids"
    model = TrainableLM(args).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
        fused=device.type == "cuda",
    )
    sampler = RowSampler(train_rows, cfg.batch_size, cfg.seed, loss_mask)
    loss_fn = torch.compile(model.loss) if cfg.compile else model.loss
    ckpt_path, csv_path, png_path = cfg.out_dir / "ckpt.pt", cfg.out_dir / "loss.csv", cfg.out_dir / "loss.png"
    step, elapsed = 0, 0.0
    state = load_state(ckpt_path) if resume else None
    if state is None and cfg.init_from is not None:
        model.load_state_dict(initial_weights(Path(cfg.init_from), args, cfg.seed), strict=True)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, elapsed = int(state["step"]), float(state["elapsed_s"])
        log.info("resumed from %s at step %d (%.1f min trained)", ckpt_path, step, elapsed / 60)
    truncate_csv(csv_path, step) if state is not None else csv_path.unlink(missing_ok=True)
    tokens_per_step = cfg.batch_size * cfg.seq_len
    budget_s = cfg.max_minutes * 60 if cfg.max_minutes is not None else None
    log.info(
        "model %s: %.2fM parameters, %d train rows of %d tokens (%.1fM tokens), device %s, batch %d, autocast %s, "
        "compile %s",
        cfg.preset, sum(p.numel() for p in model.parameters()) / 1e6, train_rows.shape[0], cfg.seq_len,
        train_rows.numel() / 1e6, device, cfg.batch_size, "bf16" if autocast_enabled(cfg, device) else "off",
        cfg.compile,
    )  # fmt: skip

    def csv_row(step: int, elapsed: float, lr: float, loss: float, **more: str) -> dict[str, Any]:
        return {"step": step, "tokens": step * tokens_per_step, "elapsed_s": f"{elapsed:.1f}", "lr": f"{lr:.3g}",
                "train_loss": f"{loss:.4f}", **more}  # fmt: skip

    def progress_of(step: int, elapsed: float) -> float:
        by_steps = step / cfg.max_steps
        return max(by_steps, elapsed / budget_s) if budget_s else by_steps

    def held_out() -> tuple[float, dict[str, str]]:
        v = val_loss(model, val_rows["files"], cfg, device)
        more = {"val_loss": f"{v:.4f}"}
        if "dists" in val_rows:
            more["val_dist_loss"] = f"{val_loss(model, val_rows['dists'], cfg, device):.4f}"
        return v, more

    def checkpoint(step: int, elapsed: float, last_loss: float) -> float:
        v, more = held_out()
        append_csv(csv_path, csv_row(step, elapsed, opt.param_groups[0]["lr"], last_loss, **more))
        config = {k: str(x) for k, x in asdict(cfg).items()}
        save_state(
            ckpt_path,
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "elapsed_s": elapsed,
             "config": config},
        )  # fmt: skip
        export_model(cfg.out_dir / "export", args, model.hf_state_dict(), tokenizer)
        plot_losses(csv_path, png_path)
        log.info("checkpoint at step %d: held-out loss %.4f, exported to %s", step, v, cfg.out_dir / "export")
        return v

    if state is None and cfg.init_from is not None:  # where the run starts: step 0, before any update
        v0, more0 = held_out()
        append_csv(csv_path, csv_row(0, 0.0, 0.0, float("nan"), **more0))
        log.info("held-out loss of the initial weights: %.4f", v0)
    bar = _Progress(enabled=progress, total=budget_s or cfg.max_steps, by_time=budget_s is not None)
    last_ckpt, last_loss, first_loss = elapsed, float("nan"), float("nan")
    window_tokens, window_t = 0, time.time()
    model.train()
    with bar:
        while step < cfg.max_steps and (budget_s is None or elapsed < budget_s):
            t0 = time.time()
            lr = lr_at(cfg, step, progress_of(step, elapsed))
            for g in opt.param_groups:
                g["lr"] = lr
            x, y = sampler.batch(step)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with autocast_context(cfg, device):
                loss = loss_fn(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            last_loss = loss.item()
            if math.isnan(first_loss):
                first_loss = last_loss
            assert math.isfinite(last_loss), f"loss became {last_loss} at step {step}"
            step += 1
            elapsed += time.time() - t0
            window_tokens += tokens_per_step
            tok_s = window_tokens / max(time.time() - window_t, 1e-9)
            bar.update(elapsed if budget_s else step, loss=last_loss, tok_s=tok_s, step=step, lr=lr)
            if step % cfg.log_every == 0:
                append_csv(csv_path, csv_row(step, elapsed, lr, last_loss, tok_s=f"{tok_s:.0f}"))
                log.debug("step %d loss %.4f lr %.3g %.0f tok/s", step, last_loss, lr, tok_s)
                window_tokens, window_t = 0, time.time()
            if elapsed - last_ckpt >= cfg.checkpoint_minutes * 60:
                checkpoint(step, elapsed, last_loss)
                last_ckpt = elapsed
        final_val = checkpoint(step, elapsed, last_loss)
    summary = {
        "steps": step,
        "tokens": step * tokens_per_step,
        "minutes": round(elapsed / 60, 1),
        "first_train_loss": first_loss,
        "final_train_loss": last_loss,
        "final_val_loss": final_val,
        "export": str(cfg.out_dir / "export"),
        "data": info,
    }
    log.info("done: %s", summary)
    return summary


class _Progress:
    """A rich progress bar with loss and tokens/s, or nothing (tests, --quiet)."""

    def __init__(self, *, enabled: bool, total: float, by_time: bool) -> None:
        self.enabled, self.total, self.by_time = enabled, total, by_time
        self._bar: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("[bold]train"), BarColumn(), TextColumn("step {task.fields[step]}"),
                TextColumn("loss {task.fields[loss]:.3f}"), TextColumn("{task.fields[tok_s]:.0f} tok/s"),
                TextColumn("lr {task.fields[lr]:.2e}"), TimeElapsedColumn(), TimeRemainingColumn(),
                console=Console(stderr=True), refresh_per_second=2,
            )  # fmt: skip
            self._bar.__enter__()
            self._task = self._bar.add_task("train", total=self.total, step=0, loss=float("nan"), tok_s=0.0, lr=0.0)
        return self

    def update(self, completed: float, **fields: float) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, **fields)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
