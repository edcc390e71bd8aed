"""`waferline train` and `waferline eval`: bad numbers are refused with the flag's name, before any work starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from waferline.cli import eval as eval_command
from waferline.cli import train as train_command

pytestmark = pytest.mark.usefixtures("single_thread")  # eval sets torch's threads before it checks; put them back


def test_cli_rejects_bad_numbers_with_a_clear_error() -> None:
    parser = argparse.ArgumentParser()
    eval_command.add_arguments(parser)
    with pytest.raises(ValueError, match="--line-cases"):
        eval_command.run(parser.parse_args(["--line-cases", "-1"]))
    parser = argparse.ArgumentParser()
    train_command.add_arguments(parser)
    with pytest.raises(ValueError, match="--max-minutes"):
        train_command.run(parser.parse_args(["--max-minutes", "0"]))


def test_max_dist_mb_zero_trains_on_every_file_and_a_negative_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from waferline.training import train as train_module

    seen: list[train_module.TrainConfig] = []

    def fake_train(cfg: train_module.TrainConfig, **_: object) -> dict[str, object]:
        seen.append(cfg)
        raise SystemExit(0)  # stop before any work: only the configuration is under test

    monkeypatch.setattr(train_module, "train", fake_train)
    parser = argparse.ArgumentParser()
    train_command.add_arguments(parser)
    with pytest.raises(ValueError, match="--max-dist-mb"):
        train_command.run(parser.parse_args(["--max-dist-mb", "-1"]))
    for flag, cap in (("0", None), ("2.5", 2.5)):
        with pytest.raises(SystemExit):
            train_command.run(parser.parse_args(["--max-dist-mb", flag, "--max-steps", "1"]))
        assert seen[-1].max_dist_mb == cap


def test_a_run_continues_from_a_committed_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Train a few steps, keep only the checkpoint and its loss log (what is committed), and continue elsewhere."""
    import json
    import shutil

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"m{i}.py").write_text(f"def f{i}(x):\n    return x * {i} + {i}\n\n\nclass C{i}:\n    pass\n" * 8)
    common = ["--preset", "tiny", "--seq-len", "64", "--batch-size", "2", "--corpus", str(corpus), "--quiet",
              "--threads", "0", "--checkpoint-minutes", "1000"]  # fmt: skip

    def train(*more: str) -> dict[str, object]:
        parser = argparse.ArgumentParser()
        train_command.add_arguments(parser)
        assert train_command.run(parser.parse_args([*common, *more])) == 0
        return dict(json.loads(capsys.readouterr().out))

    first = train("--out", str(tmp_path / "a"), "--max-steps", "3")
    assert first["steps"] == 3
    kept = tmp_path / "committed"
    kept.mkdir()
    for name in ("ckpt.pt", "loss.csv"):
        shutil.copy2(tmp_path / "a" / name, kept / name)
    shutil.copy2(tmp_path / "a" / "tokenizer.json", tmp_path / "tokenizer.json")
    second = train("--out", str(tmp_path / "b"), "--max-steps", "5", "--resume-from", str(kept / "ckpt.pt"),
                   "--tokenizer", str(tmp_path / "tokenizer.json"))  # fmt: skip
    assert second["steps"] == 5  # two more steps, not five
    rows = (tmp_path / "b" / "loss.csv").read_text().splitlines()
    assert rows[0].startswith("step,") and rows[-1].startswith("5,")
    assert any(r.startswith("3,") for r in rows), "the first run's checkpoint row is kept: it resumed, not restarted"
    with pytest.raises(OSError, match="no such checkpoint"):
        train("--out", str(tmp_path / "c"), "--resume-from", str(tmp_path / "missing.pt"))
