from dataclasses import replace
from pathlib import Path

import pytest
import torch

from waferline.engine.model import ModelArgs
from waferline.engine.tokenizer import Tokenizer
from waferline.training.artifacts import export_model
from waferline.training.grow import GrowthError, args_differ, check_growable, grow_state_dict, layer_positions
from waferline.training.model import TrainableLM
from waferline.training.train import initial_weights

SRC = ModelArgs(
    model_type="qwen2", vocab_size=96, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=48,
    max_seq_len=64, norm_eps=1e-12, qkv_bias=True, tie_embeddings=True,
)  # fmt: skip
# (RMSNorm's eps is added to a mean over d dims before, D after: 1e-12 keeps that below float32's rounding)
WIDE = replace(SRC, dim=48, n_heads=6, n_kv_heads=3, head_dim=8)
DEEP = replace(SRC, n_layers=5)
ALL = replace(SRC, dim=48, n_layers=4, n_heads=6, n_kv_heads=3, head_dim=8, intermediate_size=80)
SHIPPED = Path(__file__).parents[2] / "engine" / "models" / "waferline-mini"


def _model(args: ModelArgs, seed: int = 0) -> TrainableLM:
    torch.manual_seed(seed)
    model = TrainableLM(args)
    model.reset_parameters()
    with torch.no_grad():  # norms and biases away from their init, so that the growth has to keep them
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.3)
    return model


def _grown(dst: ModelArgs, eps: float = 0.0) -> tuple[TrainableLM, TrainableLM]:
    src_model = _model(SRC)
    big = TrainableLM(dst)
    big.load_state_dict(grow_state_dict(SRC, src_model.state_dict(), dst, eps=eps), strict=True)
    return src_model, big


@pytest.mark.parametrize(
    "dst", [WIDE, DEEP, ALL, replace(SRC, intermediate_size=64)], ids=["wide", "deep", "all", "mlp"]
)
def test_grown_model_computes_the_same_logits(dst: ModelArgs) -> None:
    src_model, big = _grown(dst)
    tokens = torch.randint(0, SRC.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(big(tokens), src_model(tokens), atol=2e-5, rtol=1e-4)


def test_grown_model_is_larger_and_noise_moves_it_only_a_little() -> None:
    src_model, big = _grown(ALL, eps=1e-3)
    assert sum(p.numel() for p in big.parameters()) > 2 * sum(p.numel() for p in src_model.parameters())
    tokens = torch.randint(0, SRC.vocab_size, (1, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        diff = (big(tokens) - src_model(tokens)).abs().max().item()
    assert 0 < diff < 0.05


def test_every_new_weight_gets_a_gradient_at_once() -> None:
    _, big = _grown(ALL)
    tokens = torch.randint(0, SRC.vocab_size, (2, 17), generator=torch.Generator().manual_seed(3))
    big.loss(tokens[:, :-1], tokens[:, 1:]).backward()
    grads = dict(big.named_parameters())
    # the zero sides: rows of the new residual dims and columns of the new heads, the new layer's outputs
    assert grads["model.layers.0.self_attn.o_proj.weight"].grad[SRC.dim :].abs().sum() > 0
    assert grads["model.layers.0.self_attn.o_proj.weight"].grad[:, SRC.n_heads * 8 :].abs().sum() > 0
    assert grads["model.layers.0.mlp.down_proj.weight"].grad[:, SRC.intermediate_size :].abs().sum() > 0
    assert grads["model.layers.1.mlp.down_proj.weight"].grad.abs().sum() > 0  # a new layer (old ones at 0 and 2)


def test_layers_keep_their_order_spread_evenly() -> None:
    assert layer_positions(4, 8) == [0, 2, 4, 6]
    assert layer_positions(2, 5) == [0, 2]
    assert layer_positions(3, 3) == [0, 1, 2]


@pytest.mark.parametrize(
    "dst, words",
    [
        (replace(SRC, dim=16, n_heads=2, n_kv_heads=1, head_dim=8), "shrinks"),
        (replace(SRC, n_heads=8, n_kv_heads=2), "query heads per kv head"),
        (replace(SRC, vocab_size=128), "vocab_size"),
        (replace(SRC, dim=64, head_dim=16), "head_dim"),
    ],
)
def test_shapes_that_do_not_fit_are_refused_with_the_reason(dst: ModelArgs, words: str) -> None:
    with pytest.raises(GrowthError, match=words):
        check_growable(SRC, dst)


def test_initial_weights_load_the_same_shape_and_grow_a_larger_one(tmp_path: Path) -> None:
    tokenizer = Tokenizer.from_file(SHIPPED / "tokenizer.json")
    src = replace(ModelArgs.from_name("tiny"), n_layers=1, max_seq_len=64)
    state = {k: v for k, v in _model(src).state_dict().items()}
    export_model(tmp_path / "m", src, state, tokenizer)
    same = initial_weights(tmp_path / "m", replace(src, max_seq_len=128))
    assert not args_differ(src, replace(src, max_seq_len=128))
    assert all(torch.equal(same[k], v) for k, v in state.items())
    dst = replace(src, n_layers=2)
    grown = initial_weights(tmp_path / "m", dst)
    assert grown["model.layers.1.mlp.down_proj.weight"].abs().sum() == 0
    with pytest.raises(GrowthError):
        initial_weights(tmp_path / "m", replace(src, n_layers=1, intermediate_size=100, vocab_size=4096))


@pytest.mark.parametrize("preset", ["small", "medium"])
def test_the_shipped_model_grows_into_the_larger_presets(preset: str) -> None:
    check_growable(replace(ModelArgs.from_name("tiny"), max_seq_len=1024), ModelArgs.from_name(preset))
