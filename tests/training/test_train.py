import csv
import dataclasses
from pathlib import Path

import torch

from waferline.engine.checkpoint import load_model
from waferline.engine.hf import from_hf, init_random
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware import open_device
from waferline.training.model import TrainableLM
from waferline.training.train import TrainConfig, lr_at, train

SMALL = dict(
    model_type="qwen2", vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=128,
    max_seq_len=128, norm_eps=1e-6, qkv_bias=True, tie_embeddings=True,
)  # fmt: skip


def test_trainable_model_computes_the_engines_logits() -> None:
    for tie in (True, False):
        args = ModelArgs(**{**SMALL, "tie_embeddings": tie})
        state = init_random(args, seed=1)
        engine = Transformer(args, open_device("cpu"))
        engine.load(from_hf(args, state.items()))
        model = TrainableLM(args)
        missing = model.load_state_dict(state, strict=True)
        assert not missing.missing_keys
        tokens = torch.randint(0, args.vocab_size, (20,), generator=torch.Generator().manual_seed(0))
        kv = engine.open_cache(32)
        want = engine.forward(tokens, kv, 0, last_only=False)  # (T, vocab)
        with torch.no_grad():
            got = model(tokens[None])[0]
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert set(model.hf_state_dict()) == set(state)


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    cfg = TrainConfig(lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(cfg, 0, 0.0) < lr_at(cfg, 9, 0.0) == 1e-3
    assert lr_at(cfg, 50, 0.5) < 1e-3
    assert abs(lr_at(cfg, 100, 1.0) - 1e-4) < 1e-12


def _small_config(out: Path, corpus: Path, steps: int) -> TrainConfig:
    cfg = TrainConfig(
        out_dir=out, seq_len=64, batch_size=4, lr=3e-3, warmup_steps=5, max_steps=steps, corpus_root=corpus,
        checkpoint_minutes=1e9, val_rows=2, vocab_size=512, log_every=5, threads=0, held_out_percent=25,
    )  # fmt: skip
    # a smaller shape than the shipped preset keeps the test to seconds
    object.__setattr__(cfg, "model_args", lambda: ModelArgs(**{**SMALL, "max_seq_len": 64}))
    return cfg


def test_short_training_lowers_the_loss_resumes_and_exports(tmp_path: Path, corpus_dir: Path) -> None:
    out = tmp_path / "run"
    summary = train(_small_config(out, corpus_dir, steps=30), progress=False)
    assert summary["final_train_loss"] < summary["first_train_loss"] - 0.5
    for name in ("tokenizer.json", "ckpt.pt", "loss.csv", "loss.png", "export/model.safetensors"):
        assert (out / name).is_file(), name
    assert torch.load(out / "rows.pt", weights_only=True)["train"].dtype == torch.int16, "prepared rows travel in int16"
    with (out / "loss.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [5, 10, 15, 20, 25, 30, 30]  # every 5 steps, then the final checkpoint
    # resuming continues from step 30 and keeps the history up to there
    resumed = train(_small_config(out, corpus_dir, steps=35), progress=False)
    assert resumed["steps"] == 35
    with (out / "loss.csv").open() as f:
        steps = [int(r["step"]) for r in csv.DictReader(f)]
    assert steps[-3:] == [30, 35, 35]
    lm = load_model(out / "export")
    assert lm.fim is not None and lm.fim.family == "waferline" and lm.args.max_seq_len == 64
    # a new run initialised from the exported weights starts where the first one ended, not at random
    cfg = _small_config(tmp_path / "finetune", corpus_dir, steps=2)
    cfg.init_from = out / "export"
    (tmp_path / "finetune").mkdir()
    (tmp_path / "finetune" / "tokenizer.json").write_bytes((out / "tokenizer.json").read_bytes())
    tuned = train(cfg, progress=False)
    assert tuned["first_train_loss"] < summary["first_train_loss"] - 0.5
    with (tmp_path / "finetune" / "loss.csv").open() as f:
        start = next(csv.DictReader(f))
    assert start["step"] == "0" and abs(float(start["val_loss"]) - resumed["final_val_loss"]) < 1e-3
    # a larger shape starts from the same weights grown (training/grow.py), at the same held-out loss
    grown_cfg = _small_config(tmp_path / "grown", corpus_dir, steps=2)
    grown_cfg.init_from = out / "export"
    object.__setattr__(grown_cfg, "model_args", lambda: ModelArgs(**{**SMALL, "max_seq_len": 64, "n_layers": 3}))
    (tmp_path / "grown").mkdir()
    (tmp_path / "grown" / "tokenizer.json").write_bytes((out / "tokenizer.json").read_bytes())
    train(grown_cfg, progress=False)
    with (tmp_path / "grown" / "loss.csv").open() as f:
        start = next(csv.DictReader(f))
    assert abs(float(start["val_loss"]) - resumed["final_val_loss"]) < 1e-3
    assert load_model(tmp_path / "grown" / "export").args.n_layers == 3


def test_config_is_a_dataclass_with_the_shipped_defaults() -> None:
    cfg = TrainConfig()
    assert dataclasses.is_dataclass(cfg)
    args = cfg.model_args()
    assert (args.dim, args.n_layers, args.vocab_size, args.max_seq_len) == (256, 4, 8192, 1024)


def test_third_party_corpus_adds_files_and_a_held_out_distribution_loss(
    tmp_path: Path, corpus_dir: Path, texts: list[str]
) -> None:
    import json

    folder = tmp_path / "third"
    folder.mkdir()
    with (folder / "corpus.jsonl").open("w") as f:
        for i, text in enumerate(texts):
            for split in ("train", "held_out_dist"):
                row = {"dist": f"d{i}", "version": "1", "licence": "MIT", "path": f"{split}/m{i}.py", "split": split,
                       "text": text + f"\nSPLIT = {split!r}\n"}  # fmt: skip
                f.write(json.dumps(row) + "\n")
    out = tmp_path / "run"
    cfg = dataclasses.replace(_small_config(out, corpus_dir, steps=10), third_party=folder)
    object.__setattr__(cfg, "model_args", lambda: ModelArgs(**{**SMALL, "max_seq_len": 64}))
    summary = train(cfg, progress=False)
    assert summary["data"]["held_out_distribution_files"] == len(texts)
    with (out / "loss.csv").open() as f:
        last = list(csv.DictReader(f))[-1]
    assert float(last["val_dist_loss"]) > 0 and float(last["val_loss"]) > 0


def _git_repo(path: Path) -> Path:
    """A bare-enough git history: one Python file, then a commit that changes it in two places."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)

    path.mkdir()
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    before = "".join(f"value_{i} = compute({i})\n" for i in range(12))
    (path / "m.py").write_text(before)
    git("add", "m.py")
    git("commit", "-q", "-m", "one")
    (path / "m.py").write_text(before.replace("compute(0)", "compute(0, fast=True)").replace(
        "compute(2)", "compute(2, fast=True)"))  # fmt: skip
    git("commit", "-q", "-am", "two")
    return path / ".git"


def test_next_edit_mode_mixes_in_rows_with_the_loss_on_their_middle(tmp_path: Path, corpus_dir: Path) -> None:
    from waferline.training.dataset import RowSampler

    out = tmp_path / "run"
    cfg = _small_config(out, corpus_dir, steps=3)
    cfg.next_edit_files, cfg.next_edit_git = 50, (_git_repo(tmp_path / "repo"),)
    summary = train(cfg, progress=False)
    kinds = summary["data"]["example_kinds"]
    assert kinds.get("next-edit commit", 0) >= 1 and kinds.get("next-edit rename", 0) >= 1
    stored = torch.load(out / "rows.pt", weights_only=True)
    mask = stored["train_mask"]
    assert mask.shape == stored["train"].shape and 0 < mask.float().mean() < 1, "prompts are not trained on"
    _, y = RowSampler(stored["train"], 2, 0, mask).batch(0)
    assert ((y == -100) == ~RowSampler(mask.long(), 2, 0).batch(0)[1].bool()).all()
    assert summary["steps"] == 3
