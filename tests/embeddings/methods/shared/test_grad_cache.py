"""Cached in-batch losses (embeddings.methods.shared.grad_cache) and gradient checkpointing on the tiny BERT.

What "the same gradients" means: the cached loss must give the gradient of ONE graph over the same
mini-batch forward passes (``Chunked.embed``) with the same dropout masks, i.e. the RNG replay must be
exact; with dropout off it must also match today's uncached path (``embed``, other padding) up to
rounding. Tolerance: a few hundred fp32 ulps of the largest gradient entry (sums over a few hundred
terms), not one machine's output. A second seed changes the reference by O(1): the tests can fail.
"""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.ct.objective import in_batch_tension_loss
from sts_lightning.embeddings.methods.shared.grad_cache import chunk_view
from sts_lightning.embeddings.methods.shared.in_batch import multiple_negatives_ranking_loss
from tests.helpers import GRADIENT_SENTENCES, GRADIENT_TOL, assert_same_gradients


def _module(kind: str, model_dir, dropout: bool, **kwargs):
    if kind == "mnrl":
        from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

        module = SBERTNLIModule(str(model_dir), max_length=32, objective="mnrl", **kwargs)
        module.encoder_model.train(dropout)
        return module
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    return ContrastiveTensionModule(str(model_dir), max_length=32, objective="in_batch", scheduler="constant",
                                    dropout=dropout, **kwargs)


def _step(module, kind: str, sentences: list[str]):
    """The module's own training loss on ``sentences`` (cached when its mini_batch_size is set)."""
    if kind == "mnrl":
        n = len(sentences) // 3
        return module._mnrl_step({"anchors": sentences[:n], "positives": sentences[n:2 * n],
                                  "negatives": sentences[2 * n:]})
    module._set_dropout()
    return module._in_batch_step({"sentences": sentences}, None)


def _reference(module, kind: str, sentences: list[str], size: int):
    """The same loss from ONE graph over the cached path's mini-batch passes (no cache)."""
    if kind == "mnrl":
        n = len(sentences) // 3
        emb = chunk_view(module.encoder, module.pool, sentences, size).embed()
        return multiple_negatives_ranking_loss(emb[:n], emb[n:2 * n], emb[2 * n:])
    module._set_dropout()
    emb1 = chunk_view(module.encoder, module.pool, sentences, size).embed()
    emb2 = chunk_view(module.encoder2, module.pool, sentences, size).embed()
    return in_batch_tension_loss(emb1.float(), emb2.float())


def _grads(module) -> dict[str, torch.Tensor]:
    out = {n: p.grad.to_dense().clone() for n, p in module.named_parameters() if p.grad is not None}
    module.zero_grad(set_to_none=True)
    return out


def _max_diff(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in b)


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointing"])
@pytest.mark.parametrize("kind", ["mnrl", "ct"])
def test_cached_gradients_with_dropout_match_one_graph(kind, checkpointing, tiny_model_dir, one_thread):
    module = _module(kind, tiny_model_dir, dropout=True, mini_batch_size=4, gradient_checkpointing=checkpointing)
    sentences = GRADIENT_SENTENCES if kind == "mnrl" else GRADIENT_SENTENCES[:16]
    torch.manual_seed(1)
    cached = _step(module, kind, sentences)
    cached.backward()
    got = _grads(module)
    torch.manual_seed(1)
    ref = _reference(module, kind, sentences, 4)
    ref.backward()
    want = _grads(module)
    torch.testing.assert_close(cached.detach(), ref.detach(), rtol=GRADIENT_TOL, atol=GRADIENT_TOL)
    assert_same_gradients(got, want)
    torch.manual_seed(2)  # other dropout masks: the comparison above can fail
    _reference(module, kind, sentences, 4).backward()
    assert _max_diff(got, _grads(module)) > 1e3 * GRADIENT_TOL


@pytest.mark.parametrize("matryoshka", [None, [32, 8]], ids=["full", "matryoshka"])  # the cache takes each prefix too
@pytest.mark.parametrize("kind", ["mnrl", "ct"])
def test_cached_matches_uncached_without_dropout(kind, matryoshka, tiny_model_dir, one_thread):
    module = _module(kind, tiny_model_dir, dropout=False, matryoshka_dims=matryoshka)
    sentences = GRADIENT_SENTENCES if kind == "mnrl" else GRADIENT_SENTENCES[:16]
    uncached = _step(module, kind, sentences)
    uncached.backward()
    want = _grads(module)
    for size in (1, 3 if kind == "mnrl" else 4, len(sentences)):
        module.hparams.mini_batch_size = size
        cached = _step(module, kind, sentences)
        cached.backward()
        torch.testing.assert_close(cached.detach(), uncached.detach(), rtol=GRADIENT_TOL, atol=GRADIENT_TOL)
        assert_same_gradients(_grads(module), want)


def test_surrogate_passes_on_the_incoming_gradient(tiny_model_dir, one_thread):
    """Lightning divides the loss by accumulate_grad_batches (an fp16 scaler multiplies it): the cached
    gradients must scale with it, as ``backward`` of the uncached loss does."""
    module = _module("mnrl", tiny_model_dir, dropout=False)
    (_step(module, "mnrl", GRADIENT_SENTENCES) / 4).backward()
    want = _grads(module)
    module.hparams.mini_batch_size = 3
    (_step(module, "mnrl", GRADIENT_SENTENCES) / 4).backward()
    assert_same_gradients(_grads(module), want)


def test_ct_row_sparse_embedding_gradients_stay_sparse(tiny_model_dir, one_thread):
    """CT's single-device RMSprop takes row-sparse word-embedding gradients: the cache must keep them sparse."""
    module = _module("ct", tiny_model_dir, dropout=False, mini_batch_size=4)
    for model in (module.encoder_model, module.encoder2_model):
        model.get_input_embeddings().sparse = True
    _step(module, "ct", GRADIENT_SENTENCES[:16]).backward()
    assert module.encoder_model.get_input_embeddings().weight.grad.is_sparse


def test_checkpointing_recomputes_layers_also_in_eval_mode(tiny_model_dir, one_thread):
    """Fewer tensors are saved for the backward pass, also for CT with dropout off (eval mode)."""
    def saved_bytes(module) -> int:
        total = 0

        def pack(t):
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            _step(module, "ct", GRADIENT_SENTENCES[:16])
        return total

    plain = saved_bytes(_module("ct", tiny_model_dir, dropout=False))
    checkpointed = saved_bytes(_module("ct", tiny_model_dir, dropout=False, gradient_checkpointing=True))
    assert checkpointed < plain / 2


@pytest.mark.parametrize("value", [0, -4, 2.5, True])
def test_bad_mini_batch_size(value, tiny_model_dir):
    with pytest.raises(ConfigError, match="model.mini_batch_size"):
        _module("mnrl", tiny_model_dir, dropout=False, mini_batch_size=value)


def test_mini_batch_size_needs_an_in_batch_objective(tiny_model_dir):
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule
    from sts_lightning.lightning_modules.sbert_nli import SBERTNLIModule

    with pytest.raises(ConfigError, match="model.mini_batch_size=4 applies to objective=mnrl"):
        SBERTNLIModule(str(tiny_model_dir), mini_batch_size=4)
    with pytest.raises(ConfigError, match="model.mini_batch_size=4 applies to objective=in_batch"):
        ContrastiveTensionModule(str(tiny_model_dir), mini_batch_size=4)


# --------------------------------------------------------------------------------- 2 ranks, gloo DDP
class _Step(torch.nn.Module):
    """What Lightning's DDP wrapper does: the training loss computed inside DDP's forward."""

    def __init__(self, module, kind: str) -> None:
        super().__init__()
        self.module, self.kind = module, kind

    def forward(self, sentences: list[str]):
        return _step(self.module, self.kind, sentences)


def _rank(rank: int, world: int, init_file: str, kind: str, model_dir: str, sentences: list[str], out) -> None:
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        shard = _shard(kind, sentences, rank, world)
        results = {}
        for dropout in (True, False):
            module = _module(kind, model_dir, dropout=dropout, mini_batch_size=2)
            ddp = DistributedDataParallel(_Step(module, kind))
            torch.manual_seed(10 + rank)
            ddp(shard).backward()  # DDP averages the surrogate's gradients over the ranks
            results[f"cached_{dropout}"] = _grads(module)
            torch.manual_seed(10 + rank)
            _reference(module, kind, shard, 2).backward()  # one graph, no DDP: average by hand
            grads = _grads(module)
            for g in grads.values():
                torch.distributed.all_reduce(g)
                g /= world
            results[f"reference_{dropout}"] = grads
        out[rank] = results
    finally:
        torch.distributed.destroy_process_group()


def _shard(kind: str, sentences: list[str], rank: int, world: int) -> list[str]:
    """This rank's rows: for MNRL, its anchors with their positives and negatives."""
    if kind == "ct":
        n = len(sentences) // world
        return sentences[rank * n:(rank + 1) * n]
    n, m = len(sentences) // 3, len(sentences) // 3 // world
    return [s for part in range(3) for s in sentences[part * n + rank * m:part * n + (rank + 1) * m]]


@pytest.mark.slow  # 2 spawned DDP ranks: 25-61 s on 2 shared cores
@pytest.mark.parametrize("kind", ["mnrl", "ct"])
def test_cached_gradients_under_two_rank_ddp(kind, tmp_path, tiny_model_dir, one_thread):
    sentences = GRADIENT_SENTENCES if kind == "mnrl" else GRADIENT_SENTENCES[:16]
    out = mp.Manager().dict()
    mp.spawn(_rank, args=(2, str(tmp_path / "init"), kind, str(tiny_model_dir), sentences, out), nprocs=2)
    single = _module(kind, tiny_model_dir, dropout=False)  # the global batch on one device, uncached
    _step(single, kind, sentences).backward()
    want = _grads(single)
    for rank in range(2):
        assert_same_gradients(out[rank]["cached_True"], out[rank]["reference_True"])  # dropout replayed under DDP
        assert_same_gradients(out[rank]["cached_False"], want)  # DDP's average of the cached ranks = the global gradient


@pytest.mark.parametrize(("overrides", "message"), [
    (["model.mini_batch_size=0"], r"model.mini_batch_size=0 is not allowed: it must be an integer >= 1 or null"),
    (["model.mini_batch_size=-2"], r"model.mini_batch_size=-2 is not allowed"),
    (["model.mini_batch_size=3"], r"model.mini_batch_size=3 must divide the per-device batch 8 \(data.batch_size=8"),
    (["model.mini_batch_size=8", "trainer.accelerator=cpu", "trainer.devices=2"],
     r"model.mini_batch_size=8 must divide the per-device batch 4 \(data.batch_size=8 over 2"),
])
def test_bad_mini_batch_size_in_config_fails_before_the_model_loads(overrides, message, tmp_path, tiny_model_dir,
                                                                     train_data_dir, monkeypatch):
    from sts_lightning.embeddings.encoders.hf import HFEncoder
    from sts_lightning.runs.train_run import train
    from tests.helpers import compose_train_config as _cfg

    def no_load(*args, **kwargs):
        raise AssertionError("the model loaded before the config was checked")

    monkeypatch.setattr(HFEncoder, "from_pretrained", no_load)
    cfg = _cfg(tmp_path, tiny_model_dir, train_data_dir, ["model=sbert_nli", "model.objective=mnrl",
                                                          "data.format=triplets", "data.batch_size=8", *overrides])
    with pytest.raises(ConfigError, match=message):
        train(cfg)
