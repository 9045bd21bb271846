"""RankCSE's objective (embeddings.methods.rankcse.objective) against the reference implementation's logic.

The oracle below re-implements, in plain torch, what perceptiveshawty/RankCSE computes (a community
implementation; the authors released none) at commit 17c5226be5962803f893b80f63e409eea20f27a3:
``rankcse/models.py`` (``Similarity``, ``ListNet.forward``, ``ListMLE.forward``, ``Divergence.forward``, the loss part
of ``cl_forward``: InfoNCE on ``cos / temp``, ``kd_loss`` on a clone of those logits, ``sd_loss`` between the
two views' softmaxed lists, summed with weight 1), ``rankcse/trainers.py`` (the teachers' lists:
``cos(z1T, z2T) / tau2`` per teacher, ``alpha * T1 + (1 - alpha) * T2``) and ``rankcse/teachers.py`` (a teacher's
``avg`` pooling). Ours and the oracle run on the same tiny BERT (two copies of one checkpoint), the same batch
and the same two tiny teachers: loss to 1e-5 and the same gradients, for ListNet, ListMLE and the combined loss.
The two views differ (view 2 reads each sentence's words reversed) so the consistency term is not trivially 0.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sts_lightning.embeddings.methods.rankcse.objective import (
    consistency_loss,
    listmle_loss,
    listnet_loss,
    rankcse_loss,
    teacher_scores,
)
from tests.helpers import WORDS, assert_same_gradients

SENTENCES = [" ".join(WORDS[i:i + 3 + i % 7]) for i in range(0, 40, 5)]
REVERSED = [" ".join(reversed(s.split())) for s in SENTENCES]
TEMP, TAU2, ALPHA = 0.05, 0.05, 0.33


# ------------------------------------------------------------------ the oracle (the reference's logic, re-written)
def ref_sim(x, y, temp):
    return nn.CosineSimilarity(dim=-1)(x, y) / temp  # Similarity.forward


def ref_listnet(teacher, student, gamma):
    p = F.log_softmax(student.fill_diagonal_(float("-inf")), dim=-1)
    q = F.softmax(teacher.fill_diagonal_(float("-inf")), dim=-1)
    return gamma * (-(q * p).nansum() / q.nansum())


def ref_listmle(teacher, student, gamma):
    perm = torch.randperm(student.shape[-1])
    y_pred, y_true = student[:, perm], teacher[:, perm]
    y_true_sorted, indices = y_true.sort(descending=True, dim=-1)
    mask = y_true_sorted == -1
    preds = torch.gather(y_pred, dim=1, index=indices)
    preds[mask] = float("-inf")
    preds = preds - preds.max(dim=1, keepdim=True).values
    cumsums = torch.cumsum(preds.exp().flip(dims=[1]), dim=1).flip(dims=[1])
    obs = torch.log(cumsums + 1e-7) - preds
    obs[mask] = 0.0
    return gamma * torch.mean(torch.sum(obs, dim=1))


def ref_divergence(p, q):
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    p, q = p.view(-1, p.size(-1)), q.view(-1, q.size(-1))
    m = (0.5 * (p + q)).log().clamp(min=1e-7)
    return 0.5 * (kl(m, p.log()) + kl(m, q.log()))


def ref_teacher_list(t1, t2):
    first = ref_sim(t1.unsqueeze(1), t1.unsqueeze(0), TAU2)  # eval-mode teacher: z1T == z2T
    second = ref_sim(t2.unsqueeze(1), t2.unsqueeze(0), TAU2)
    return ALPHA * first + (1.0 - ALPHA) * second


def ref_loss(z1, z2, teacher, distillation: str, gamma: float = 1.0):
    cos_sim = ref_sim(z1.unsqueeze(1), z2.unsqueeze(0), TEMP)
    loss = nn.CrossEntropyLoss()(cos_sim, torch.arange(cos_sim.size(0)))
    kd = (ref_listnet if distillation == "listnet" else ref_listmle)(teacher.clone(), cos_sim.clone(), gamma)
    z2_z1 = ref_sim(z2.unsqueeze(1), z1.unsqueeze(0), TEMP)
    sd = ref_divergence(cos_sim.clone().softmax(dim=-1).clamp(min=1e-7), z2_z1.softmax(dim=-1).clamp(min=1e-7))
    return loss + sd + kd


def ref_avg(model, batch):  # Teacher.encode with pooler "avg"
    with torch.no_grad():
        out = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).expand(out.size()).float()
        return (out * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-7)


# ------------------------------------------------------------------------------------------------- the tests
def test_listnet_and_listmle_by_hand():
    teacher = torch.tensor([[9.0, 3.0, 1.0], [2.0, 9.0, 5.0], [0.0, 4.0, 9.0]])
    student = torch.tensor([[5.0, 1.0, 2.0], [0.5, 5.0, 1.5], [1.0, 0.0, 5.0]])
    # ListNet: row 0 over columns {1, 2}: q = softmax(3, 1), log p = log_softmax(1, 2)
    want = 0.0
    for i in range(3):
        others = [j for j in range(3) if j != i]
        t = torch.tensor([teacher[i, j] for j in others])
        s = torch.tensor([student[i, j] for j in others])
        want += -(F.softmax(t, 0) * F.log_softmax(s, 0)).sum().item()
    assert listnet_loss(teacher, student).item() == pytest.approx(want / 3, rel=1e-6)
    # ListMLE: the teacher's order per row, Plackett-Luce
    want = 0.0
    for i in range(3):
        s = [student[i, j].item() for j in teacher[i].argsort(descending=True).tolist()]
        want += sum(math.log(sum(math.exp(v) for v in s[k:]) + 1e-7 * math.exp(max(s))) - s[k] for k in range(3))
    assert listmle_loss(teacher, student).item() == pytest.approx(want / 3, rel=1e-5)


def test_jsd_is_the_divergence_and_zero_for_equal_lists():
    torch.manual_seed(0)
    a, b = torch.randn(5, 5), torch.randn(5, 5)
    p, q = a.softmax(-1), b.softmax(-1)
    m = (p + q) / 2
    want = 0.5 * (F.kl_div(m.log(), p, reduction="batchmean") + F.kl_div(m.log(), q, reduction="batchmean"))
    torch.testing.assert_close(consistency_loss(a, b, "jsd"), want, rtol=1e-5, atol=1e-6)
    assert consistency_loss(a, a, "jsd").abs().item() < 1e-6
    # the reference's formula: minus the mean entropy of the two lists (its log-mixture clamps to the constant 1e-7)
    entropy = -(p * p.log()).sum(-1).mean() / 2 - (q * q.log()).sum(-1).mean() / 2
    torch.testing.assert_close(consistency_loss(a, b, "repo"), -entropy - 1e-7, rtol=1e-5, atol=1e-6)


def test_teacher_weights_normalise_to_the_reference_alpha():
    torch.manual_seed(1)
    t1, t2 = torch.randn(6, 4), torch.randn(6, 7)  # teachers of different sizes: only their lists combine
    want = ref_teacher_list(t1, t2)
    torch.testing.assert_close(teacher_scores([t1, t2], [ALPHA, 1 - ALPHA], TAU2), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(teacher_scores([t1, t2], [33.0, 67.0], TAU2), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(teacher_scores([t1, t2], [1.0, 1.0], TAU2, offset=2, rows=3),
                               (ref_sim(t1.unsqueeze(1), t1.unsqueeze(0), TAU2)
                                + ref_sim(t2.unsqueeze(1), t2.unsqueeze(0), TAU2))[2:5] / 2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("distillation", ["listnet", "listmle"])
def test_loss_and_gradients_equal_the_reference(distillation, tiny_model_dir, other_tiny_model_dir, one_thread):
    """Our student (RankCSEModule's embedding path: cls + SimCSE's MLP), our teachers (``build_source``, mean
    pooling) and our loss against the oracle on a copy of the same BERT, MLP and teachers."""
    from transformers import AutoModel, AutoTokenizer

    from sts_lightning.embeddings.sources.build import build_source
    from sts_lightning.lightning_modules.rankcse import RankCSEModule

    torch.manual_seed(0)
    ours = RankCSEModule(str(tiny_model_dir), ranking_loss=distillation, consistency="repo",
                         teacher_weights=[ALPHA, 1 - ALPHA], max_length=32)
    ours.eval()  # dropout off on both sides: the views differ by their text (see the module docstring)
    theirs = AutoModel.from_pretrained(str(tiny_model_dir), add_pooling_layer=False).eval()
    mlp = nn.Sequential(nn.Linear(32, 32), nn.Tanh())  # MLPLayer: dense + tanh
    mlp.load_state_dict(ours.mlp.state_dict())
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))

    teachers = [build_source(str(d)).embed(SENTENCES) for d in (tiny_model_dir, other_tiny_model_dir)]
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    their_teachers = [ref_avg(AutoModel.from_pretrained(str(d)).eval(), batch)
                      for d in (tiny_model_dir, other_tiny_model_dir)]
    for a, b in zip(teachers, their_teachers, strict=True):
        torch.testing.assert_close(a.float(), b, rtol=1e-5, atol=1e-5)

    torch.manual_seed(7)  # ListMLE's tie-breaking shuffle draws from the global generator on both sides
    emb = ours.embed_ids(ours.tokenize(SENTENCES) + ours.tokenize(REVERSED))
    got = rankcse_loss(*emb.chunk(2), ours.teacher_list(teachers), ranking_loss=distillation, consistency="repo")
    torch.manual_seed(7)

    def their_embed(texts):
        enc = tok(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
        return mlp(theirs(**enc).last_hidden_state[:, 0])  # pooler "cls": [CLS] then the MLP

    want = ref_loss(their_embed(SENTENCES), their_embed(REVERSED), ref_teacher_list(*their_teachers), distillation)
    torch.testing.assert_close(got["loss"], want, rtol=1e-5, atol=1e-5)
    assert got["distillation"].item() > 0 and got["consistency"].item() < 0  # the reference's term: minus entropy

    got["loss"].backward()
    want.backward()
    names = ("embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
             "encoder.layer.1.output.dense.weight")
    mine = {n: p.grad for n, p in ours.encoder_model.named_parameters() if n in names}
    mine |= {f"mlp.{n}": p.grad for n, p in ours.mlp.named_parameters()}
    ref = {n: p.grad for n, p in theirs.named_parameters() if n in names}
    ref |= {f"mlp.{n}": p.grad for n, p in mlp.named_parameters()}
    assert len(ref) == len(names) + 2
    assert_same_gradients(mine, ref)


def test_combined_loss_weights_and_paper_consistency():
    """``loss = infonce + beta * consistency + gamma * distillation``; jsd is the paper's divergence."""
    torch.manual_seed(3)
    z1, z2, teacher = torch.randn(6, 8), torch.randn(6, 8), torch.randn(6, 6) / TAU2
    parts = rankcse_loss(z1, z2, teacher, ranking_loss="listnet", gamma=0.5, beta=2.0)
    logits = ref_sim(z1.unsqueeze(1), z2.unsqueeze(0), TEMP)
    infonce = F.cross_entropy(logits, torch.arange(6))
    jsd = consistency_loss(logits, ref_sim(z2.unsqueeze(1), z1.unsqueeze(0), TEMP), "jsd")
    kd = ref_listnet(teacher.clone(), logits.clone(), 1.0)
    torch.testing.assert_close(parts["loss"], infonce + 2.0 * jsd + 0.5 * kd, rtol=1e-5, atol=1e-5)
    sharper = rankcse_loss(z1, z2, teacher, ranking_loss="listnet", rank_temperature=TEMP / 2)
    torch.testing.assert_close(sharper["distillation"], ref_listnet(teacher.clone(), logits.clone() * 2, 1.0),
                               rtol=1e-5, atol=1e-5)


def _rank_grads(rank: int, world: int, init_file: str, tensors, teachers, distillation, out) -> None:
    from sts_lightning.embeddings.methods.shared.in_batch import gather_with_grad

    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        n = tensors[0].shape[0] // world
        parts = [t[rank * n:(rank + 1) * n].clone().requires_grad_(True) for t in tensors]
        gathered = [gather_with_grad(t[rank * n:(rank + 1) * n])[0] for t in teachers]  # as RankCSEModule.teacher_list
        teacher = teacher_scores(gathered, [1.0, 2.0], TAU2, offset=rank * n, rows=n)
        loss = rankcse_loss(*parts, teacher, ranking_loss=distillation)["loss"]
        loss.backward()
        out[rank] = (loss.detach(), [p.grad.clone() for p in parts])
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow  # 2 spawned DDP ranks: 8-18 s on 2 shared cores
@pytest.mark.parametrize("distillation", ["listnet", "listmle"])
def test_two_rank_gather_gives_the_single_device_loss_and_gradient(distillation, tmp_path):
    """Each rank's rows of every list (InfoNCE, consistency, the teachers' and the student's lists) against the
    gathered candidates: DDP's average equals the global batch's loss and gradient."""
    import torch.multiprocessing as mp

    torch.manual_seed(0)
    tensors = [torch.randn(8, 5) for _ in range(2)]
    teachers = [torch.randn(8, 6), torch.randn(8, 3)]
    full = [t.clone().requires_grad_(True) for t in tensors]
    single = rankcse_loss(*full, teacher_scores(teachers, [1.0, 2.0], TAU2), ranking_loss=distillation)["loss"]
    single.backward()
    out = mp.Manager().dict()
    mp.spawn(_rank_grads, args=(2, str(tmp_path / "init"), tensors, teachers, distillation, out), nprocs=2)
    torch.testing.assert_close((out[0][0] + out[1][0]) / 2, single.detach(), rtol=1e-5, atol=1e-6)
    for r in range(2):
        for got, want in zip(out[r][1], (t.grad[r * 4:(r + 1) * 4] for t in full), strict=True):
            torch.testing.assert_close(got / 2, want, rtol=1e-5, atol=1e-6)


PAIR_SENTENCES = [f"sentence {i}" for i in range(6)]


def _cosine_teacher(first, second):
    """A pair teacher over fixed random vectors (seeded: every process draws the same)."""
    vectors = torch.randn(len(PAIR_SENTENCES), 5, generator=torch.Generator().manual_seed(3))
    index = {s: i for i, s in enumerate(PAIR_SENTENCES)}
    return torch.nn.functional.cosine_similarity(vectors[[index[s] for s in first]], vectors[[index[s] for s in second]])


def _rank_pair_rows(rank: int, world: int, init_file: str, out) -> None:
    from types import SimpleNamespace

    from sts_lightning.embeddings.methods.rankcse.objective import pair_teacher_list
    from sts_lightning.embeddings.methods.shared.in_batch import gather_sentences

    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        mine = PAIR_SENTENCES[rank * 3:(rank + 1) * 3]
        out[rank] = pair_teacher_list(SimpleNamespace(score_pairs=_cosine_teacher), mine, gather_sentences(mine))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow  # 2 spawned DDP ranks
def test_two_ranks_read_their_rows_of_the_pair_teachers_global_list(tmp_path):
    """Under DDP each rank's anchors are read against every rank's sentences, in the order the vectors gather."""
    from types import SimpleNamespace

    import torch.multiprocessing as mp

    from sts_lightning.embeddings.methods.rankcse.objective import pair_teacher_list

    single = pair_teacher_list(SimpleNamespace(score_pairs=_cosine_teacher), PAIR_SENTENCES, PAIR_SENTENCES)
    out = mp.Manager().dict()
    mp.spawn(_rank_pair_rows, args=(2, str(tmp_path / "init"), out), nprocs=2)
    torch.testing.assert_close(torch.cat([out[0], out[1]]), single, atol=0, rtol=0)
