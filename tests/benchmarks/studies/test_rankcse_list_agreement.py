"""RankCSE's list agreement: the measures on lists whose answer is known, and the whole run on the tiny model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from benchmarks.studies import rankcse_list_agreement as agreement


def test_a_student_equal_to_its_teacher_agrees_fully_and_a_reversed_one_not_at_all():
    vectors = torch.randn(20, 6, generator=torch.Generator().manual_seed(0))
    same = agreement.batch_agreement(vectors, [vectors, vectors], weights=[1, 1], head=4)
    for key in ("student_spearman", "student_head", "teachers_spearman", "teachers_head", "student_spearman_0",
                "student_spearman_1"):
        assert same[key] == pytest.approx(1.0, abs=1e-5), key
    cos = F.normalize(vectors, dim=-1) @ F.normalize(vectors, dim=-1).T
    opposite = agreement._off_diagonal(-cos)  # a list ordered exactly the other way
    assert agreement._row_spearman(opposite, agreement._off_diagonal(cos)).mean().item() == pytest.approx(-1.0, abs=1e-5)
    assert agreement._head_overlap(opposite, agreement._off_diagonal(cos), 4).max().item() == 0.0  # 19 >= 2 x 4


def test_listnet_head_mass_is_the_softmax_of_the_combined_list():
    g = torch.Generator().manual_seed(1)
    student, first, second = (torch.randn(10, 4, generator=g) for _ in range(3))
    out = agreement.batch_agreement(student, [first, second], weights=[1, 3], tau2=0.5, head=3)
    combined = sum(w * F.normalize(t, dim=-1) @ F.normalize(t, dim=-1).T for w, t in ((0.25, first), (0.75, second)))
    q = torch.softmax(agreement._off_diagonal(combined / 0.5), dim=1)
    assert out["listnet_head_mass"] == pytest.approx(q.topk(3, dim=1).values.sum(dim=1).mean().item(), abs=1e-6)
    assert -1.0 <= out["teachers_spearman"] <= 1.0 and 0.0 <= out["teachers_head"] <= 1.0


def test_the_run_reads_model_rankcses_batches(tiny_model_dir, train_data_dir, tmp_path):
    result = agreement.measure(str(tiny_model_dir), str(train_data_dir), batches=2, teachers=[str(tiny_model_dir)],
                               weights=[1.0], batch_size=8, max_sentences=40, head=2, cache_dir=str(tmp_path))
    assert set(result) == {"student_spearman", "student_head", "listnet_head_mass", "student_spearman_0"}
    assert -1.0 <= result["student_spearman"] <= 1.0 and 0.0 <= result["student_head"] <= 1.0
    # one teacher: its combined list is its own cosines / tau2, the same order
    assert result["student_spearman"] == pytest.approx(result["student_spearman_0"], abs=1e-6)
    assert 2 / 7 <= result["listnet_head_mass"] <= 1.0  # the top 2 of 7 candidates hold at least their share
