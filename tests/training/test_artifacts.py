"""Checkpoints load through torch's restricted unpickler: what a run saves comes back, anything else is refused."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from waferline.training.artifacts import load_state, save_state


class _Planted:
    """An arbitrary object: unpickling it would import and build it, which weights_only refuses."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("unpickled",))


def test_a_saved_checkpoint_loads_back_with_weights_only(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    save_state(path, {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 7, "elapsed_s": 1.5,
                      "config": {"lr": "0.001"}})  # fmt: skip
    state = load_state(path)
    assert state is not None and state["step"] == 7 and state["config"] == {"lr": "0.001"}
    assert torch.equal(state["model"]["weight"], model.state_dict()["weight"])
    assert state["optimizer"]["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    assert not path.with_name("ckpt.pt.tmp").exists()


def test_a_checkpoint_holding_an_object_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {}, "step": 1, "extra": _Planted()}, path)
    with pytest.raises(ValueError, match="not a plain checkpoint"):
        load_state(path)
    assert "unpickled" not in capsys.readouterr().out, "the planted object was never built"
    torch.save([1, 2], path)
    with pytest.raises(ValueError, match="a checkpoint is a dict"):
        load_state(path)
    path.write_bytes(pickle.dumps({"step": 1})[:-3])
    with pytest.raises(ValueError, match=r"ckpt\.pt: not a"):
        load_state(path)


def test_no_checkpoint_is_none(tmp_path: Path) -> None:
    assert load_state(tmp_path / "absent.pt") is None
