"""STSEvaluationCallback: same numbers as ``score_tasks``, DDP-correct gathering, modes restored.

The DDP test runs this file as a script with ``strategy="ddp"`` (2 CPU ranks, gloo), in a subprocess:
- not ``"ddp"`` inside pytest: its launcher re-runs ``sys.argv`` for rank 1, i.e. pytest itself;
- not ``"ddp_spawn"``: it pickles the module, and an unpickled transformers-5 model in a fresh process
  silently returns ``hidden_states=None`` (its output-capture registry is filled only in ``__init__``);
- ``"ddp"`` is also what ``train.py`` uses, and a subprocess with a timeout turns a DDP hang into a failure.
Ranks write what they saw (gathered vectors, metrics, checkpoint score) to ``tmp_path``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only
from torch.utils.data import DataLoader, TensorDataset

from sts_lightning.callbacks.sts_evaluation import STSEvaluationCallback
from sts_lightning.callbacks.sts_shards import shard_for_rank, unshard
from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.methods.pooling import PoolingScorer
from sts_lightning.embeddings.scoring.scorer import PairScorer
from sts_lightning.sts.scoring import main_score, score_tasks
from tests.paths import ROOT

DIST_ENV = {"MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "GLOBAL_RANK", "WORLD_SIZE", "RANK"}
TASKS = ["stsb-dev", "sts12", "stsb-test"]
KEY = "val/stsb-dev_spearman"
# One new sentence on top of the 12 shared ones: 13 unique sentences, so 2 ranks get uneven shards.
EXTRA_PAIRS = [("a cat sits on the bench .", "a man plays a guitar .", 1.0),
               ("a man plays a guitar .", "a dog runs in the park .", 0.5),
               ("a child reads a book .", "a boy rides a bike .", 2.0)]


class TinySTSModule(L.LightningModule):
    """Tiny BERT + mean pooling; the loss touches every parameter so DDP needs no unused-parameter search."""

    def __init__(self, model_path: str) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.encoder = HFEncoder.from_pretrained(model_path, max_length=32, batch_size=4)
        self.model = self.encoder.model  # registered here, shared (not copied) with the encoder
        self.train_ids, self.train_mask = self.encoder.pad(self.encoder.tokenize(["a man plays a guitar ."]))

    def scorer(self) -> PoolingScorer:
        return PoolingScorer(self.encoder, "mean")

    def probe_scorer(self, pooling: str) -> PoolingScorer:
        return PoolingScorer(self.encoder, pooling)

    def training_step(self, batch, batch_idx):
        out = self.model(input_ids=self.train_ids, attention_mask=self.train_mask)
        return out.last_hidden_state.pow(2).mean() + out.pooler_output.pow(2).mean()

    def validation_step(self, batch, batch_idx):
        return None

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(4, 1)), batch_size=1)

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(2, 1)), batch_size=1)


class MemoryLogger(Logger):
    """Keeps (step, metrics) in memory so the test sees exactly what loggers received."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[int | None, dict]] = []

    @property
    def name(self) -> str:
        return "memory"

    @property
    def version(self) -> int:
        return 0

    @rank_zero_only
    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    @rank_zero_only
    def log_metrics(self, metrics, step=None) -> None:
        self.records.append((step, dict(metrics)))


class ModeProbe(L.Callback):
    """Records every submodule's train/eval mode at train start (placed before and after the STS callback)."""

    def on_train_start(self, trainer, pl_module) -> None:
        self.modes = {name: m.training for name, m in pl_module.named_modules()}


class RecordingSTSCallback(STSEvaluationCallback):
    """Writes each rank's gathered representation to disk (spawned ranks cannot hand objects back)."""

    def __init__(self, out_dir: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.out_dir = out_dir

    def gather_representation(self, trainer, pl_module, scorer):
        rep = super().gather_representation(trainer, pl_module, scorer)
        torch.save({"rep": rep, "unique": self.unique}, Path(self.out_dir) / f"rep{trainer.global_rank}.pt")
        return rep


class MetricProbe(L.Callback):
    """Writes each rank's monitored metrics and its ModelCheckpoint's view of them."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
            torch.save(metrics, Path(self.out_dir) / f"metrics{trainer.global_rank}.pt")

    def on_fit_end(self, trainer, pl_module) -> None:
        score = trainer.checkpoint_callback.best_model_score
        torch.save(None if score is None else float(score), Path(self.out_dir) / f"best{trainer.global_rank}.pt")


@pytest.fixture()
def data_dir(tiny_data_dir, tmp_path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(tiny_data_dir, root)
    lines = [f"main-forums\tdeft\t2014\t{i:04d}\t{s:.3f}\t{a}\t{b}" for i, (a, b, s) in enumerate(EXTRA_PAIRS)]
    (root / "stsb" / "sts-test.csv").write_text("\n".join(lines) + "\n")
    return root


def trainer_kwargs(tmp_path: Path) -> dict:
    return dict(accelerator="cpu", max_epochs=1, limit_train_batches=2, limit_val_batches=1,
                enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path))


@pytest.mark.parametrize(("total", "world_size"), [(1, 1), (1, 3), (2, 4), (5, 2), (13, 2), (13, 4)])
def test_sharding_round_trip(total, world_size):
    unique = [f"s{i}" for i in range(total)]
    shards = [shard_for_rank(unique, r, world_size) for r in range(world_size)]
    assert len({len(s) for s in shards}) == 1  # same work, same number of forward passes on every rank
    assert all(len(set(s)) == len(s) for s in shards)  # encode() cannot de-duplicate the top-up away
    gathered = torch.stack([torch.tensor([int(s[1:]) for s in shard]) for shard in shards])
    assert torch.equal(unshard(gathered, total), torch.arange(total))


def test_single_process_matches_score_tasks_and_restores_modes(tiny_model_dir, data_dir, tmp_path):
    module = TinySTSModule(str(tiny_model_dir))
    callback = STSEvaluationCallback(tasks=TASKS, data_dir=str(data_dir), batch_size=4, eval_at_start=True)
    callback.setup(None, module, "fit")  # type: ignore[arg-type]
    before_training = score_tasks(PoolingScorer(module.encoder, "mean"), callback.tasks)
    probe_before, probe_after, logger = ModeProbe(), ModeProbe(), MemoryLogger()
    trainer = L.Trainer(callbacks=[probe_before, callback, probe_after], logger=logger,
                        enable_checkpointing=False, **trainer_kwargs(tmp_path))
    trainer.fit(module)

    # (d) the callback put the module in eval mode (the start number is deterministic despite dropout 0.1)
    # and handed every submodule back in the mode it found it in.
    assert probe_before.modes == probe_after.modes
    assert any(probe_before.modes.values())
    # (c) the "before" number reached the loggers at step 0, before any training step.
    step, first = logger.records[0]
    assert step == 0
    assert first[KEY] == main_score(before_training["stsb-dev"])
    assert callback.start_metrics == first
    # (a) after training: exactly what score_tasks gives on the live (trained) weights.
    module.eval()
    expected = score_tasks(PoolingScorer(module.encoder, "mean"), callback.tasks)
    assert callback.last_results == expected
    assert callback.last_metrics[KEY] == main_score(expected["stsb-dev"])
    assert callback.last_metrics["val/stsb-test_pearson"] == main_score(expected["stsb-test"], "pearson")
    # alignment / uniformity (sts.geometry) of the same vectors, logged beside Spearman
    assert callback.last_metrics["val/stsb-dev_uniformity"] == expected["stsb-dev"]["geometry"]["uniformity"] < 0
    assert trainer.callback_metrics[KEY].item() == pytest.approx(main_score(expected["stsb-dev"]), abs=1e-4)
    assert callback.last_metrics["val/stsb-dev_pearson"] != first["val/stsb-dev_pearson"]  # live weights
    # Lightning logs epoch-end validation at the last optimizer step's index (global_step - 1).
    assert logger.records[-1][0] == trainer.global_step - 1 and KEY in logger.records[-1][1]
    # (e) the before / after table written at the end of training
    table = (Path(trainer.default_root_dir) / "sts_before_after.md").read_text()
    assert f"| stsb-dev | {first[KEY]:.2f} | {callback.last_metrics[KEY]:.2f} |" in table
    # (f) the per-pair similarities behind the before and after numbers, for compare_runs' paired differences
    from sts_lightning.sts.predictions import read_predictions
    from sts_lightning.sts.scoring import correlations

    for stage, metrics in (("before", first), ("after", callback.last_metrics)):
        saved = read_predictions(Path(trainer.default_root_dir) / "sts_predictions" / f"{stage}.npz", "pred")
        rho = correlations(saved.sims["stsb-dev"], saved.pairs["stsb-dev"].gold)["spearman"]
        assert rho == pytest.approx(metrics[KEY], abs=1e-6)


def test_probe_poolings_are_logged_beside_the_modules_own_vector(tiny_model_dir, data_dir, tmp_path):
    """``probe_poolings``: each pooling scored as ``score_tasks`` scores it, logged as ``probe/<pooling>/<task>_spearman``;
    the monitored ``val/`` metrics and the before/after table are the module's own vector's alone."""
    module = TinySTSModule(str(tiny_model_dir))
    callback = STSEvaluationCallback(tasks=["stsb-dev"], data_dir=str(data_dir), batch_size=4, eval_at_start=True,
                                     probe_poolings=["cls", "first_last_avg"])
    logger = MemoryLogger()
    trainer = L.Trainer(callbacks=[callback], logger=logger, enable_checkpointing=False, **trainer_kwargs(tmp_path))
    trainer.fit(module)
    module.eval()
    for pooling in ("cls", "first_last_avg"):
        expected = main_score(score_tasks(PoolingScorer(module.encoder, pooling), callback.tasks)["stsb-dev"])
        assert logger.records[-1][1][f"probe/{pooling}/stsb-dev_spearman"] == pytest.approx(expected, abs=1e-4)
    # the monitored metric is the module's own (mean) vector's: on the fixture's few pairs two poolings can rank
    # alike, so this compares with the own scorer's score rather than asserting it differs from a probe's
    own = main_score(score_tasks(module.scorer(), callback.tasks)["stsb-dev"])
    assert logger.records[-1][1][KEY] == pytest.approx(own, abs=1e-4)
    assert "probe/cls/stsb-dev_spearman" in logger.records[0][1]  # before training too
    assert not [k for k in callback.last_metrics if k.startswith("probe/")]
    assert "probe" not in (Path(trainer.default_root_dir) / "sts_before_after.md").read_text()


def test_probe_poolings_need_a_probe_scorer(tiny_model_dir, data_dir, tmp_path):
    class NoProbes(TinySTSModule):
        probe_scorer = None

    callback = STSEvaluationCallback(tasks=["stsb-dev"], data_dir=str(data_dir), probe_poolings=["cls"])
    trainer = L.Trainer(callbacks=[callback], logger=False, enable_checkpointing=False, **trainer_kwargs(tmp_path))
    with pytest.raises(TypeError, match="probe_poolings needs NoProbes.probe_scorer"):
        trainer.validate(NoProbes(str(tiny_model_dir)))


def run_ddp_fit(model_dir: str, data_dir: str, out_dir: str) -> None:
    """One rank of a 2-process CPU DDP fit; Lightning's launcher re-runs this file for rank 1."""
    out = Path(out_dir)
    callback = RecordingSTSCallback(str(out / "ranks"), tasks=TASKS, data_dir=data_dir, batch_size=4)
    checkpoint = ModelCheckpoint(dirpath=out / "ckpt", monitor=KEY, mode="max", save_top_k=1)
    trainer = L.Trainer(devices=2, strategy="ddp", logger=False,
                        callbacks=[callback, MetricProbe(str(out / "ranks")), checkpoint], **trainer_kwargs(out))
    trainer.fit(TinySTSModule(model_dir))


@pytest.mark.slow  # a 2-rank DDP subprocess: 14-63 s on 2 shared cores
def test_ddp_gathers_like_single_process(tiny_model_dir, data_dir, tmp_path):
    (tmp_path / "ranks").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}  # fresh port, no inherited rank
    env.update(PYTHONPATH=str(ROOT), WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run([sys.executable, __file__, str(tiny_model_dir), str(data_dir), str(tmp_path)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    out = tmp_path / "ranks"
    callback = STSEvaluationCallback(tasks=TASKS, data_dir=str(data_dir))

    # The checkpoint holds the weights that were evaluated (one epoch, saved right after validation).
    (ckpt_path,) = (tmp_path / "ckpt").glob("*.ckpt")
    reference = TinySTSModule(str(tiny_model_dir))
    reference.load_state_dict(torch.load(ckpt_path, weights_only=False)["state_dict"])
    reference.eval()
    callback.setup(None, reference, "fit")  # type: ignore[arg-type]
    assert len(callback.unique) == 13
    single = reference.scorer().represent(callback.unique)["embedding"]

    rank0, rank1 = (torch.load(out / f"rep{r}.pt") for r in (0, 1))
    assert rank0["unique"] == rank1["unique"] == callback.unique
    assert torch.equal(rank0["rep"]["embedding"], rank1["rep"]["embedding"])
    # Shards are batched differently from one process (other padding widths): equal up to float32 noise.
    torch.testing.assert_close(rank0["rep"]["embedding"], single)

    metrics0, metrics1 = (torch.load(out / f"metrics{r}.pt") for r in (0, 1))
    assert metrics0 == metrics1 and KEY in metrics0 and "val/sts_avg_spearman" in metrics0
    expected = score_tasks(reference.scorer(), callback.tasks)
    assert metrics0[KEY] == pytest.approx(main_score(expected["stsb-dev"]), abs=1e-3)
    best0, best1 = (torch.load(out / f"best{r}.pt") for r in (0, 1))
    assert best0 == best1 == metrics0[KEY]  # rank 1's ModelCheckpoint saw the metric too


if __name__ == "__main__":
    run_ddp_fit(*sys.argv[1:4])


def test_before_after_table_rows():
    from sts_lightning.callbacks.sts_metrics import AVG_KEY, before_after_table

    start = {"val/stsb-dev_spearman": 50.0, "val/stsb-dev_pearson": 49.0, AVG_KEY: 50.0}
    last = {"val/stsb-dev_spearman": 61.25, "val/stsb-dev_pearson": 60.0, AVG_KEY: 61.25}
    rows = before_after_table(start, last).splitlines()
    assert rows[2] == "| stsb-dev | 50.00 | 61.25 | +11.25 |" and rows[3].startswith("| average |")
    assert len(rows) == 4  # pearson keys are not rows


def test_spearman_line_lists_only_spearman_scores():
    from sts_lightning.callbacks.sts_metrics import spearman_line

    metrics = {"val/stsb-dev_spearman": torch.tensor(71.0234), "val/stsb-dev_pearson": 70.0, "train/loss": 2.0,
               "val/sts_avg_spearman": 61.06}
    assert spearman_line(metrics) == "stsb-dev 71.02, sts_avg 61.06"


class CosinePairScorer(PairScorer):
    """A pair scorer (each pair read on its own, as a cross-encoder does) over the tiny module's mean vectors."""

    def __init__(self, encoder: HFEncoder) -> None:
        self.inner, self.calls = PoolingScorer(encoder, "mean"), []

    def score_pairs(self, sentences1, sentences2):
        self.calls.append(len(sentences1))
        first, second = self.inner.represent(sentences1), self.inner.represent(sentences2)
        return self.inner.similarity(first, second)


class TinyPairModule(TinySTSModule):
    def scorer(self) -> CosinePairScorer:
        self._pair_scorer = getattr(self, "_pair_scorer", None) or CosinePairScorer(self.encoder)
        return self._pair_scorer


@pytest.mark.parametrize(("total", "world_size"), [(5, 2), (13, 4)])
def test_pair_sharding_round_trip(total, world_size):
    """A pair scorer's units are pair indices: every pair scored once, gathered back into pair order."""
    shards = [shard_for_rank(range(total), r, world_size) for r in range(world_size)]
    gathered = torch.stack([torch.tensor(shard) for shard in shards])
    assert torch.equal(unshard(gathered, total), torch.arange(total))


def test_a_pair_scorer_is_scored_pair_by_pair(tiny_model_dir, data_dir, tmp_path):
    """The callback hands a ``PairScorer`` the pairs (not the unique sentences) and logs what ``score_tasks`` gives."""
    module = TinyPairModule(str(tiny_model_dir))
    callback = STSEvaluationCallback(tasks=TASKS, data_dir=str(data_dir), batch_size=4)
    trainer = L.Trainer(callbacks=[callback], logger=False, enable_checkpointing=False, **trainer_kwargs(tmp_path))
    trainer.fit(module)
    module.eval()
    pairs = sum(t.num_pairs for t in callback.tasks)
    assert module.scorer().calls == [pairs]  # one call with every pair of every task
    expected = score_tasks(module.scorer(), callback.tasks)
    assert {t: r["all"] for t, r in callback.last_results.items()} == {t: r["all"] for t, r in expected.items()}
    assert "val/stsb-dev_uniformity" not in callback.last_metrics  # no vectors: no geometry
