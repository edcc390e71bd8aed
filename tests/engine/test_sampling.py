"""engine/sampling.py: the nucleus by a growing top-k equals the one a full sort gives, and a draw follows its
weights and never lands on a zero weight."""

from __future__ import annotations

import pytest
import torch

from waferline.engine.sampling import draw, nucleus


def sorted_nucleus(probs: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """What sample() did before: the whole vocabulary sorted."""
    top, order = probs.sort(descending=True)
    return top * ((top.cumsum(-1) - top) < top_p), order


@pytest.mark.parametrize("top_p", [1e-6, 0.3, 0.9, 0.999])
@pytest.mark.parametrize("scale", [0.1, 1.0, 8.0])  # flat (the nucleus needs many ids: k grows) to peaked
def test_the_nucleus_equals_a_full_sorts(top_p: float, scale: float) -> None:
    g = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(5000, generator=g) * scale, -1)
    kept, order = nucleus(probs, top_p)
    want, want_order = sorted_nucleus(probs, top_p)
    n = int((want > 0).sum())
    assert n >= 1 and int((kept > 0).sum()) == n
    assert torch.equal(kept[:n], want[:n]) and torch.equal(probs[order[:n]], kept[:n])
    assert set(order[:n].tolist()) == set(want_order[:n].tolist())  # tied ids may come in another order


def test_a_draw_follows_the_weights_and_skips_zeros() -> None:
    weights = torch.tensor([0.0, 3.0, 0.0, 1.0, 0.5, 0.0, 0.0])  # unnormalised; zeros inside and at the end
    g = torch.Generator().manual_seed(11)
    n = 30_000
    counts = torch.bincount(torch.tensor([draw(weights, g) for _ in range(n)]), minlength=len(weights)).float()
    assert counts[weights == 0].sum() == 0
    assert 0.5 * float((counts / n - weights / weights.sum()).abs().sum()) < 0.02
    one = torch.zeros(49152)
    one[-2] = 1e-30  # a single tiny weight next to a zero at the end
    assert {draw(one, g) for _ in range(20)} == {49150}


def test_draws_repeat_with_the_seed() -> None:
    weights = torch.rand(1000, generator=torch.Generator().manual_seed(2))
    a, b = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    assert [draw(weights, a) for _ in range(50)] == [draw(weights, b) for _ in range(50)]
