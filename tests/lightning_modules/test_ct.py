"""Contrastive Tension: pair layout, dropout off, two diverging copies, copy selection and export.

One short ``train(cfg)`` run (2 optimizer steps on the tiny BERT) is shared by the module.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from sts_lightning.embeddings.errors import ConfigError
from tests.helpers import WORDS
from tests.paths import CONFIG_DIR


@pytest.fixture(scope="module")
def ct_data_dir(tmp_path_factory, tiny_data_dir) -> Path:
    root = tmp_path_factory.mktemp("ct_data") / "data"
    shutil.copytree(tiny_data_dir, root)
    (root / "wiki").mkdir()
    lines = [" ".join(WORDS[j % len(WORDS)] for j in range(i, i + 5)) for i in range(40)]
    (root / "wiki" / "wiki_sentences_100k.txt").write_text("\n".join(lines) + "\n")
    return root


def _cfg(out: Path, model_dir: Path, data_dir: Path, overrides=()):
    base = ["experiment=ct/minilm_l3", f"model.model_name_or_path={model_dir}", "model.max_length=32",
            "model.eval_batch_size=8", f"paths.data_dir={data_dir}", f"data.cache_dir={out / 'cache'}",
            "trainer=cpu", "trainer.max_steps=-1", "trainer.val_check_interval=1.0",
            "trainer.check_val_every_n_epoch=1", "trainer.log_every_n_steps=1",
            "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
            "callbacks.sts_evaluation.batch_size=8"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*base, *overrides])
    with open_dict(cfg):
        cfg.output_dir = str(out)
    return cfg


@pytest.fixture(scope="module")
def ct_run(tmp_path_factory, tiny_model_dir, ct_data_dir):
    """Train 2 steps, recording every pair batch and the dropout modes seen while training."""
    import sts_lightning.lightning_modules.ct as ct
    from sts_lightning.runs.train_run import train

    batches, modes, models = [], [], []
    real_pairs, real_step = ct.make_ct_pairs, ct.ContrastiveTensionModule.training_step

    def record_pairs(*args, **kwargs):
        batches.append((real_pairs(*args, **kwargs), kwargs))
        return batches[-1][0]

    def record_step(self, batch, batch_idx):
        if not models:
            models.append(self)
            for m in (self.encoder_model, self.encoder2_model):
                assert any(isinstance(d, torch.nn.Dropout) for d in m.modules())
                for d in m.modules():
                    if isinstance(d, torch.nn.Dropout):
                        d.register_forward_pre_hook(lambda mod, _: modes.append(mod.training)
                                                    if torch.is_grad_enabled() else None)
        return real_step(self, batch, batch_idx)

    mp = pytest.MonkeyPatch()
    mp.setattr(ct, "make_ct_pairs", record_pairs)
    mp.setattr(ct.ContrastiveTensionModule, "training_step", record_step)
    out = tmp_path_factory.mktemp("ct_run")
    try:
        metrics = train(_cfg(out, tiny_model_dir, ct_data_dir, ["+trainer.limit_train_batches=2"]))
    finally:
        mp.undo()
    return {"metrics": metrics, "out": out, "batches": batches, "modes": modes, "model": models[0]}


def test_config_composes_with_paper_hyperparameters(tmp_path, tiny_model_dir, ct_data_dir):
    cfg = _cfg(tmp_path, tiny_model_dir, ct_data_dir)
    m = cfg.model
    assert m._target_.endswith("ContrastiveTensionModule") and cfg.data._target_.endswith("SentenceDataModule")
    assert (m.optimizer, m.scheduler, m.lr, m.final_lr, m.pairs, m.positives) == ("rmsprop", "step", 1e-5, 2e-6, 16, 2)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        full = compose(config_name="train", overrides=["experiment=ct/minilm_l3"])
    assert full.model.max_length == 75 and full.trainer.val_check_interval == 500 and not full.model.dropout


def test_pairs_layout_and_dropout_during_training(ct_run):
    assert len(ct_run["batches"]) == 2
    for (texts1, texts2, labels), kwargs in ct_run["batches"]:
        assert kwargs == {"batch_size": 16, "positives": 2} and len(texts1) == len(texts2) == 16
        assert labels.tolist() == [1.0] + [0.0] * 7 + [1.0] + [0.0] * 7
        assert all((a == b) == bool(y) for a, b, y in zip(texts1, texts2, labels.tolist(), strict=True))
    assert ct_run["batches"][0][0][0] != ct_run["batches"][1][0][0]  # a new draw each step
    assert ct_run["modes"] and not any(ct_run["modes"])  # dropout off in both copies, gradients on


def test_both_copies_train_and_diverge(ct_run, tiny_model_dir):
    from transformers import AutoModel

    model, start = ct_run["model"], AutoModel.from_pretrained(tiny_model_dir).state_dict()
    key = "encoder.layer.0.attention.self.query.weight"
    w1, w2 = model.encoder_model.state_dict()[key], model.encoder2_model.state_dict()[key]
    assert not torch.equal(w1, start[key]) and not torch.equal(w2, start[key]) and not torch.equal(w1, w2)
    metrics = ct_run["metrics"]
    assert torch.isfinite(torch.tensor(metrics["train/loss"]))
    for name in ("val/model1_stsb-dev_spearman", "val/model2_stsb-dev_spearman", "val/stsb-dev_spearman"):
        assert name in metrics


def test_one_process_updates_only_the_word_embedding_rows_of_the_batches_tokens(ct_run, tiny_model_dir):
    """Row-sparse gradients + ``RowSparseRMSprop`` in a real fit; the checkpoint holds a plain RMSprop state."""
    from transformers import AutoModel

    from sts_lightning.lightning_modules.row_sparse_rmsprop import RowSparseRMSprop

    model = ct_run["model"]
    assert isinstance(model.trainer.optimizers[0], RowSparseRMSprop)
    start = AutoModel.from_pretrained(tiny_model_dir).get_input_embeddings().weight
    seen = set()
    for (texts1, texts2, _), _ in ct_run["batches"]:
        for ids in model.encoder.tokenizer(list(texts1) + list(texts2))["input_ids"]:
            seen.update(ids)
    for copy in (model.encoder_model, model.encoder2_model):
        embedding = copy.get_input_embeddings()
        assert embedding.sparse
        moved = (embedding.weight.detach() != start.detach()).any(dim=1).nonzero().flatten().tolist()
        assert moved and set(moved) <= seen
    ckpt = torch.load(ct_run["out"] / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    states = ckpt["optimizer_states"][0]["state"].values()
    sparse_states = [s for s in states if "row_step" in s]  # both copies' embeddings, every row caught up
    assert len(sparse_states) == 2
    assert all(torch.equal(s["row_step"], torch.full_like(s["row_step"], float(s["step"]))) for s in sparse_states)


def test_better_copy_is_selected_and_exported(ct_run):
    from transformers import AutoModel

    metrics, model = ct_run["metrics"], ct_run["model"]
    s1, s2 = metrics["val/model1_stsb-dev_spearman"], metrics["val/model2_stsb-dev_spearman"]
    best = 2 if s2 > s1 else 1
    assert int(model.selected_copy) == best == metrics["val/ct_selected"]
    assert metrics["val/stsb-dev_spearman"] == pytest.approx(max(s1, s2), abs=1e-6)
    kept = (model.encoder_model, model.encoder2_model)[best - 1].state_dict()
    exported = AutoModel.from_pretrained(ct_run["out"] / "export").state_dict()
    key = "encoder.layer.0.attention.self.query.weight"
    assert torch.equal(exported[key], kept[key])
    ckpt = torch.load(ct_run["out"] / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    assert int(ckpt["state_dict"]["selected_copy"]) == best


def test_export_of_model2(tmp_path, tiny_model_dir):
    from transformers import AutoModel

    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    model = ContrastiveTensionModule(str(tiny_model_dir), max_length=32)
    key = "embeddings.word_embeddings.weight"
    with torch.no_grad():
        model.encoder2_model.embeddings.word_embeddings.weight.add_(1.0)
    model.selected_copy.fill_(2)
    model.export(tmp_path / "export")
    assert torch.equal(AutoModel.from_pretrained(tmp_path / "export").state_dict()[key],
                       model.encoder2_model.state_dict()[key])
    assert model.encoder_model is not model.encoder2_model  # restored after export
    assert model.scorer().encoder is model.encoder2


def test_training_step_grads_determinism_and_layout(tiny_model_dir):
    from sts_lightning.embeddings.methods.ct.objective import make_ct_pairs, pair_rng
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule, per_device_layout

    model = ContrastiveTensionModule(str(tiny_model_dir), max_length=32)
    batch = {"sentences": [" ".join(WORDS[i:i + 4]) for i in range(16)]}
    model.training_step(batch, 0).backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing and any(n.startswith("encoder2_model.") for n, _ in model.named_parameters())
    pool = batch["sentences"]
    assert make_ct_pairs(pool, pair_rng(0, 0, 3))[:2] == make_ct_pairs(pool, pair_rng(0, 0, 3))[:2]
    assert make_ct_pairs(pool, pair_rng(0, 1, 3))[:2] != make_ct_pairs(pool, pair_rng(0, 0, 3))[:2]
    assert per_device_layout(16, 2, 2) == (8, 1)
    with pytest.raises(ConfigError, match="divisible"):
        per_device_layout(16, 2, 4)


def test_step_schedule_matches_reference():
    from sts_lightning.lightning_modules.optimizers import step_lambda

    f = step_lambda(1e-5, 2e-6, 500, 4)
    lrs = {s: 1e-5 * f(s) for s in (0, 500, 501, 1000, 1001, 2000, 2001, 10_000)}
    expected = {0: 1e-5, 500: 1e-5, 501: 8e-6, 1000: 8e-6, 1001: 6e-6, 2000: 4e-6, 2001: 2e-6, 10_000: 2e-6}
    assert lrs == pytest.approx(expected)


def test_embedding_lr_gives_both_copies_word_embeddings_their_own_group(tiny_model_dir):
    """``embedding_lr``: exactly the two word-embedding matrices move to a group with that lr (also under
    the reference ``step`` schedule); every other trainable parameter stays in a group at ``lr``."""
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    model = ContrastiveTensionModule(str(tiny_model_dir), max_length=32, lr=1e-5, embedding_lr=3e-3)
    optimizer = model.configure_optimizers()["optimizer"]
    by_lr = {}
    for group in optimizer.param_groups:
        by_lr.setdefault(group["lr"], set()).update(id(p) for p in group["params"])
    embeddings = {id(model.encoder_model.embeddings.word_embeddings.weight),
                  id(model.encoder2_model.embeddings.word_embeddings.weight)}
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert by_lr[3e-3] == embeddings
    assert by_lr[1e-5] == trainable - embeddings
    assert len(ContrastiveTensionModule(str(tiny_model_dir), max_length=32)._param_groups()) == 2
    with pytest.raises(ConfigError, match="embedding_lr"):
        ContrastiveTensionModule(str(tiny_model_dir), max_length=32, embedding_lr=0.0)


def test_step_schedule_settings_are_checked_only_for_the_step_schedule(tiny_model_dir):
    """A constant-lr run below the step schedule's ``final_lr`` (2e-6) is valid; the same lr under
    ``scheduler=step`` (lr would have to *rise* to final_lr) is a config error, not a silent schedule."""
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    model = ContrastiveTensionModule(str(tiny_model_dir), max_length=32, lr=1e-7, scheduler="constant")
    assert (model.hparams.lr, model.hparams.final_lr) == (1e-7, 2e-6)
    with pytest.raises(ConfigError, match="final_lr <= lr"):
        ContrastiveTensionModule(str(tiny_model_dir), max_length=32, lr=1e-7, scheduler="step")


def test_row_sparse_updates_are_for_the_cpu_only(tiny_model_dir):
    """On a GPU the dense RMSprop step was faster (docs/speed.md "On a GPU"): the module picks it from its device."""
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    module = ContrastiveTensionModule(str(tiny_model_dir), max_length=16)
    assert module.sparse_embedding_grads()  # one process, no trainer, on the CPU
    module._device = torch.device("cuda", 0)  # where Lightning's .to() would record it; no GPU needed to decide
    assert not module.sparse_embedding_grads()
