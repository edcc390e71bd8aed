"""`waferline train`: build the corpus, tokenizer and FIM examples, then train (or resume) the default model.

The run directory keeps everything needed to resume (`--no-resume` starts over); `--export DIR` copies the final
model into DIR (for example engine/models/waferline-mini) when training ends.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs/waferline-mini"), help="run directory (resumable)")
    parser.add_argument("--preset", default="tiny", help="engine model shape preset (default: tiny)")
    parser.add_argument("--seq-len", type=int, default=1024, help="training context; becomes max_position_embeddings")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--max-minutes", type=float, default=None, help="wall-clock training budget")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--fim-rate", type=float, default=0.5, help="share of fill-in-the-middle examples")
    parser.add_argument("--passes", type=int, default=1, help="draw the corpus this many times into examples")
    parser.add_argument("--compile", action="store_true", help="torch.compile the training step (~30 s first)")
    parser.add_argument("--checkpoint-minutes", type=float, default=10.0)
    parser.add_argument("--autocast", choices=["auto", "on", "off"], default="auto", help="bfloat16 autocast")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--max-files", type=int, default=None, help="use only the first N corpus files (tests)")
    parser.add_argument("--corpus", type=Path, default=None, help="a folder of .py files instead of the stdlib")
    parser.add_argument(
        "--third-party",
        type=Path,
        default=None,
        metavar="DIR",
        help="also train on the third-party corpus in DIR (fetched with pip and built there on first use: "
        "training/corpus-pins.txt, or the names of --corpus-list)",
    )
    parser.add_argument(
        "--corpus-list", type=Path, default=None, help="distribution names to fetch when there are no pins"
    )
    parser.add_argument(
        "--max-dist-mb",
        type=float,
        default=4.0,
        help="training text from one third-party distribution at most (0: no cap, the whole corpus)",
    )
    parser.add_argument("--warmup-steps", type=int, default=30)
    parser.add_argument("--init-from", type=Path, default=None, help="start from a model directory's weights")
    parser.add_argument(
        "--tokenizer", type=Path, default=None, help="reuse this tokenizer.json instead of training one"
    )
    parser.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint in --out")
    parser.add_argument(
        "--resume-from",
        type=Path,
        default=None,
        metavar="CKPT",
        help="a checkpoint (another run's ckpt.pt) to continue from when --out has none",
    )
    parser.add_argument("--fim-files", type=int, default=None, help="draw FIM examples from N training files only")
    parser.add_argument(
        "--next-edit", action="store_true",
        help="mix in the next-edit objective: rename rows from --next-edit-files corpus files and commit rows of "
        "the --next-edit-git repositories (docs/next-edit.md)",
    )  # fmt: skip
    parser.add_argument("--next-edit-files", type=int, default=1500, help="corpus files for rename rows")
    parser.add_argument("--next-edit-git", type=Path, action="append", default=[], metavar="GIT_DIR",
                        help="a bare git directory of a train.txt distribution (repeatable)")  # fmt: skip
    parser.add_argument("--next-edit-per-repo", type=int, default=150, help="changed files of one repository")
    parser.add_argument("--pid-file", type=Path, default=None, help="write this process's id here while training")
    parser.add_argument("--export", type=Path, default=None, help="copy the final model directory here")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    import json
    import logging
    import shutil
    import sys

    from waferline.training.train import TrainConfig, train

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    if args.max_minutes is not None and args.max_minutes <= 0:
        raise ValueError(f"--max-minutes must be positive, got {args.max_minutes}")
    if args.max_dist_mb < 0:
        raise ValueError(f"--max-dist-mb must be 0 (no cap) or positive, got {args.max_dist_mb}")
    if args.passes < 1:
        raise ValueError(f"--passes must be at least 1, got {args.passes}")
    cfg = TrainConfig(
        out_dir=args.out, preset=args.preset, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
        max_steps=args.max_steps, max_minutes=args.max_minutes, seed=args.seed, fim_rate=args.fim_rate,
        passes=args.passes, compile=args.compile, checkpoint_minutes=args.checkpoint_minutes, autocast=args.autocast,
        threads=args.threads,
        max_files=args.max_files, corpus_root=args.corpus, init_from=args.init_from, third_party=args.third_party,
        max_dist_mb=args.max_dist_mb or None, warmup_steps=args.warmup_steps, fim_files=args.fim_files,
        next_edit_files=args.next_edit_files if args.next_edit else 0,
        next_edit_git=tuple(args.next_edit_git) if args.next_edit else (), next_edit_per_repo=args.next_edit_per_repo,
    )  # fmt: skip
    if args.next_edit_git and not args.next_edit:
        raise ValueError("--next-edit-git needs --next-edit")
    for git_dir in cfg.next_edit_git:
        if not (git_dir / "HEAD").is_file():
            raise OSError(f"--next-edit-git {git_dir}: not a git directory")
    if args.pid_file is not None:
        import atexit
        import os

        args.pid_file.write_text(f"{os.getpid()}\n")
        atexit.register(lambda: args.pid_file.unlink(missing_ok=True))
    if args.third_party is not None and not (args.third_party / "corpus.jsonl").is_file():
        from waferline.training.corpus import fetch_and_build

        fetch_and_build(args.third_party, args.corpus_list)
    if args.resume_from is not None:
        if not args.resume_from.is_file():
            raise OSError(f"--resume-from {args.resume_from}: no such checkpoint")
        args.out.mkdir(parents=True, exist_ok=True)
        if not (args.out / "ckpt.pt").is_file():
            shutil.copy2(args.resume_from, args.out / "ckpt.pt")
            csv = args.resume_from.with_name("loss.csv")
            if csv.is_file() and not (args.out / "loss.csv").is_file():
                shutil.copy2(csv, args.out / "loss.csv")
    if args.tokenizer is not None:  # the run directory's tokenizer is what prepare_data uses when it exists
        args.out.mkdir(parents=True, exist_ok=True)
        if not (args.out / "tokenizer.json").is_file():
            shutil.copy2(args.tokenizer, args.out / "tokenizer.json")
    summary = train(cfg, resume=not args.no_resume, progress=not args.quiet)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.export is not None:
        src = Path(summary["export"])
        args.export.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            shutil.copy2(f, args.export / f.name)
        logging.getLogger("waferline.training").info("model copied to %s", args.export)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":  # `python -m waferline.cli.train` works without the other subcommands' modules
    import sys

    _parser = argparse.ArgumentParser(prog="waferline train")
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
