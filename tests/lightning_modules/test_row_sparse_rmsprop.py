"""Row-sparse RMSprop: the same trajectory as torch's dense RMSprop, a plain RMSprop state in checkpoints."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.lightning_modules.row_sparse_rmsprop import RowSparseRMSprop


def _batches(steps: int, vocab: int, every_row: bool) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if every_row:
        return [torch.randperm(vocab, generator=g) for _ in range(steps)]
    # few rows per step, some repeated within a batch, most rows untouched for several steps
    # (the last 5 rows never: their weights must not move)
    return [torch.randint(0, vocab - 5, (7,), generator=g) for _ in range(steps)]


def _train(sparse: bool, batches: list[torch.Tensor], vocab: int = 40, save_at: int | None = None,
           resume: bool = False):
    torch.manual_seed(1)
    emb = torch.nn.Embedding(vocab, 8, sparse=sparse)
    head = torch.nn.Linear(8, 1)
    groups = [{"params": [emb.weight]}, {"params": list(head.parameters()), "weight_decay": 0.01}]
    make = (lambda: RowSparseRMSprop(groups, lr=1e-2, alpha=0.9, eps=1e-7)) if sparse else \
        (lambda: torch.optim.RMSprop(groups, lr=1e-2, alpha=0.9, eps=1e-7))
    opt = make()
    for i, ids in enumerate(batches):
        if i == save_at:  # a checkpoint; with ``resume`` the run goes on from a fresh optimizer and that state
            saved = opt.state_dict()
            if resume:
                opt = make()
                opt.load_state_dict(saved)
        loss = (head(emb(ids)).squeeze(-1) * torch.linspace(-1, 1, len(ids))).sum()
        loss.backward()
        assert emb.weight.grad.is_sparse == sparse
        opt.step()
        opt.zero_grad()
    return emb.weight.detach(), head.weight.detach(), opt


def test_rows_touched_every_step_get_torchs_update_bit_for_bit():
    batches = _batches(6, 40, every_row=True)
    sparse_w, sparse_head, _ = _train(True, batches)
    dense_w, dense_head, _ = _train(False, batches)
    assert torch.equal(sparse_w, dense_w) and torch.equal(sparse_head, dense_head)


def test_lazily_decayed_rows_follow_dense_rmsprop_and_untouched_rows_stay():
    batches = _batches(30, 40, every_row=False)
    sparse_w, sparse_head, sparse_opt = _train(True, batches)
    dense_w, dense_head, dense_opt = _train(False, batches)
    torch.testing.assert_close(sparse_w, dense_w, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sparse_head, dense_head, rtol=1e-5, atol=1e-6)
    never = sorted(set(range(40)) - set(torch.cat(batches).tolist()))
    torch.manual_seed(1)
    initial = torch.nn.Embedding(40, 8).weight.detach()
    assert never and torch.equal(sparse_w[never], initial[never])
    # the checkpointed state is a plain RMSprop state: the running averages equal the dense ones
    sparse_avg = sparse_opt.state_dict()["state"][0]["square_avg"]
    torch.testing.assert_close(sparse_avg, dense_opt.state_dict()["state"][0]["square_avg"], rtol=1e-5, atol=1e-12)


def test_a_resume_from_its_state_dict_continues_bit_for_bit():
    batches = _batches(20, 40, every_row=False)
    uninterrupted, _, _ = _train(True, batches, save_at=9)
    resumed, _, _ = _train(True, batches, save_at=9, resume=True)
    assert torch.equal(uninterrupted, resumed)
    never_saved, _, _ = _train(True, batches)  # only the rounding of the decay differs
    torch.testing.assert_close(never_saved, uninterrupted, rtol=1e-5, atol=1e-6)


def test_weight_decay_on_a_sparse_parameter_is_refused():
    emb = torch.nn.Embedding(5, 2, sparse=True)
    opt = RowSparseRMSprop([emb.weight], lr=1e-2, weight_decay=0.1)
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(ConfigError, match="weight decay"):
        opt.step()
