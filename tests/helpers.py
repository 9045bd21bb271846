"""Plain helpers that several test modules share (fixtures live in conftest.py).

Why a module of its own: a test module that imports another one runs the other's module-level code and ties
the two files together, so moving or renaming one breaks the other. Shared code lives here instead.
"""

from __future__ import annotations

import random
import shlex
import shutil
import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from tests.paths import CONFIG_DIR

# The tiny BERT's word-level vocabulary (tests/conftest.py) and the words tiny data files are made of.
WORDS = (
    "a the man woman dog cat is are plays playing guitar piano runs running eats food in on park street "
    "house car red blue big small child children sings song rides horse bike reads book water drinks "
    "cuts cooks kitchen onion slices tomato sits bench walks beach ball kicks field girl boy two three"
).split()

# The tiny SNLI dev split (conftest's train_data_dir).
NLI_ROWS = [
    ("a man plays a guitar .", "a man plays music .", "entailment"),
    ("a woman cuts an onion .", "a woman cooks food .", "neutral"),
    ("a dog runs in the park .", "a cat sits on a bench .", "contradiction"),
    ("a child reads a book .", "a child reads .", "entailment"),
    ("a girl rides a horse .", "a boy rides a bike .", "contradiction"),
    ("the man sings a song .", "the man sings in the kitchen .", "neutral"),
    ("two children kick a ball .", "children are playing .", "entailment"),
    ("a woman walks on the beach .", "a woman drinks water .", "neutral"),
]
# snli:test: premises with both an entailed and a contradicted hypothesis (data.format=triplets needs them)
NLI_TRIPLET_ROWS = [
    ("a man plays a guitar .", "a man plays music .", "entailment"),
    ("a man plays a guitar .", "a man sleeps .", "contradiction"),
    ("a dog runs in the park .", "an animal moves .", "entailment"),
    ("a dog runs in the park .", "a dog sleeps at home .", "contradiction"),
    ("two children kick a ball .", "children are playing .", "entailment"),
    ("two children kick a ball .", "nobody is playing .", "contradiction"),
]


def write_train_data(tiny_data_dir: Path, root: Path) -> Path:
    """``root``: the tiny STS files plus SentEval-layout SNLI dev (pairs) and test (triplets) splits and a small
    wiki file (conftest's ``train_data_dir``)."""
    shutil.copytree(tiny_data_dir, root)
    snli = root / "nli" / "snli"
    snli.mkdir(parents=True)
    for i, name in enumerate(("s1", "s2", "labels")):
        (snli / f"{name}.dev").write_text("".join(f"{row[i]}\n" for row in NLI_ROWS))
        (snli / f"{name}.test").write_text("".join(f"{row[i]}\n" for row in NLI_TRIPLET_ROWS))
    (root / "wiki").mkdir()
    lines = [" ".join(WORDS[j % len(WORDS)] for j in range(i, i + 6)) for i in range(40)]
    (root / "wiki" / "wiki_sentences_100k.txt").write_text("\n".join(lines) + "\n")
    return root


# `python -c PROBE <script> <overrides>` runs an entry point as `python <script> <overrides>` does and prints, at
# exit, whether torch was ever imported (config errors must come before it loads).
ENTRY_PROBE = ("import atexit, runpy, sys; atexit.register(lambda: print('torch imported:', 'torch' in sys.modules)); "
               "script = sys.argv[1]; sys.argv = sys.argv[1:]; runpy.run_path(script, run_name='__main__')")


def compose_train(overrides, searchpath: str | None = None):
    """train.yaml composed as written (no tiny fixtures); ``searchpath``: a further config folder (a planted
    method's model file)."""
    extra = [f"hydra.searchpath=[file://{searchpath}]"] if searchpath else []
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[*overrides, *extra, "paths.data_dir=/data"])


def chosen_groups(overrides: list[str]) -> tuple[str, str]:
    """(model group, data group) a set of overrides selects: Hydra's own record of the chosen config files.

    Why not a class-name map: a new method needs only its config files; the choices name them directly.
    """
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*overrides, "paths.data_dir=/data"], return_hydra_config=True)
    choices = cfg.hydra.runtime.choices
    return str(choices["model"]), str(choices["data"])


def compose_train_config(out: Path, model_dir: Path, data_dir: Path, overrides=(), config_name: str = "train"):
    """train.yaml composed for the tiny fixtures: tiny model and data, small batches, output in ``out``.

    Encoder keys go to models that have them (the cross-view AE's encoders are its data's sources);
    an explicit override of the same key wins.
    """
    model_keys = {"model_name_or_path": str(model_dir), "max_length": 32, "eval_batch_size": 8}
    base = [f"paths.data_dir={data_dir}", "data.batch_size=4", "trainer.log_every_n_steps=1",
            "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
            "callbacks.sts_evaluation.batch_size=8"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=[*base, *overrides])
    with open_dict(cfg):
        cfg.output_dir = str(out)
        # NLI data (the default, or what the model brings): the tiny SNLI dev split + SICK trial
        if str(cfg.data._target_).endswith("NLIDataModule") and not any(o.startswith("data.sources=") for o in overrides):
            cfg.data.sources = ["snli:dev", "sick:trial"]
        for key, value in model_keys.items():
            if key in cfg.model and not any(o.startswith(f"model.{key}=") for o in overrides):
                cfg.model[key] = value
    return cfg


def compose_evaluate_config(tmp_path: Path, overrides):
    """evaluate.yaml composed with ``overrides``, writing under ``tmp_path / "out"``."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=overrides)
    with open_dict(cfg):
        cfg.output_dir = str(tmp_path / "out")
        if cfg.get("embedding_cache_dir") is None:  # never the user's cache: the tiny models' weights recur
            cfg.embedding_cache_dir = str(tmp_path / "embedding_cache")
    return cfg


def experiment_names() -> list[str]:
    """What ``experiment=`` takes for every file under configs/experiment, subfolders included: ``flow/minilm_l6``."""
    root = CONFIG_DIR / "experiment"
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))


# Three SNLI rows, one of each label, in SentEval's text form.
SENTEVAL_PAIRS = [("a man plays a guitar .", "a man plays music .", "entailment"),
                  ("a dog runs in the park .", "a cat sleeps .", "contradiction"),
                  ("a woman cuts an onion .", "a woman cooks dinner .", "neutral")]


def write_senteval(root: Path, split: str, rows, labels_extra: int = 0) -> Path:
    """An SNLI split in SentEval's layout (s1 / s2 / labels files, trailing spaces as the real files have)."""
    folder = root / "nli" / "snli"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"s1.{split}").write_text("".join(f"{a} \n" for a, _, _ in rows))
    (folder / f"s2.{split}").write_text("".join(f"{b} \n" for _, b, _ in rows))
    (folder / f"labels.{split}").write_text("".join(f"{y}\n" for *_, y in rows) + "neutral\n" * labels_extra)
    return folder


class TinyPosterior(torch.nn.Module):
    """A random posterior net of the interface ``LatteMixScorer`` expects."""

    def __init__(self, latent: str, hidden: int = 32, d: int = 3, k: int = 5, dz: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.latent, self.d, self.k, self.dz = latent, d, k, dz
        width = {"categorical": d * k, "normal": 2 * dz, "ae": dz}[latent]
        self.net = torch.nn.Sequential(torch.nn.Linear(hidden, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, width))

    def forward(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.net(features)
        if self.latent == "categorical":
            return {"logits": out.view(-1, self.d, self.k)}
        if self.latent == "normal":
            mu, logvar = out.chunk(2, dim=-1)
            return {"mu": mu, "logvar": logvar}
        return {"code": out}


def token_batch(encoder, sentences):
    """All-layer token states of ``sentences`` in one batch: the two calls ``BaseEncoder.encode`` makes per batch
    (``tokenize`` then ``forward_ids``, under inference mode), without its pooling, sorting and de-duplication."""
    with torch.inference_mode():
        return encoder.forward_ids(encoder.tokenize(sentences))


def run_main(module, argv, monkeypatch, capsys) -> list[str]:
    """Run a script module's ``main()`` with ``argv`` as its command line; the lines it printed."""
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    module.main()
    return capsys.readouterr().out.strip().splitlines()


def assert_resumes_mid_epoch(make_module, done: int = 3):
    """A pair DataModule's loader resumes: epoch 1 holds epoch 0's pairs in another order; restored after ``done``
    batches it yields the rest of epoch 1; (seed, epoch) alone fixes the order. Returns (module, epoch 0 batches).

    ``make_module()`` builds a fresh, set-up module (same seed each call).
    """
    def batches(dm):
        return [tuple(b["sentences1"]) for b in dm.train_dataloader()]

    dm = make_module()
    epoch0 = batches(dm)
    dm.load_state_dict({"epoch": 1, "batches_done": 0})
    epoch1 = batches(dm)
    assert epoch0 != epoch1 and sorted(s for b in epoch0 for s in b) == sorted(s for b in epoch1 for s in b)
    resumed = make_module()
    resumed.load_state_dict({"epoch": 1, "batches_done": done})
    assert batches(resumed) == epoch1[done:]
    assert batches(make_module()) == epoch0  # (seed, epoch) alone fixes the order
    return dm, epoch0


# Sentences an export is checked on (the last one is longer than max_length: truncation).
EXPORT_SENTENCES = ["a man plays a guitar .", "a dog runs in the park", "two children read a book on the bench .",
                    " ".join(["the woman cuts an onion in the kitchen ."] * 6)]


def documented_scorer(folder: Path):
    """The scorer an export's note's ``evaluate.py`` line builds (as ``runs.evaluate_run.evaluate`` does), and
    the note."""
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.io.export_note import EXPORT, NOTE_FILE
    from sts_lightning.embeddings.scoring.registry import build_scorer

    note = (folder / NOTE_FILE).read_text()
    line = next(row.strip() for row in note.splitlines() if row.strip().startswith("python evaluate.py "))
    overrides = [arg.replace(EXPORT, str(folder)) for arg in shlex.split(line)[2:]]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=overrides)
    (encoder_name,), (spec,) = list(cfg.encoders), list(cfg.scorers)
    encoder = None if encoder_name == "none" else load_encoder(encoder_name, **OmegaConf.to_container(cfg.encoder))
    spec = spec if isinstance(spec, str) else OmegaConf.to_container(spec)
    return build_scorer(spec, encoder, OmegaConf.to_container(cfg.scorer_options)), note


def assert_same_representation(a: dict, b: dict) -> None:
    """Two scorers' ``represent`` outputs agree key by key, to 1e-5."""
    assert set(a) == set(b)
    for key in a:
        torch.testing.assert_close(torch.as_tensor(a[key]).float(), torch.as_tensor(b[key]).float(),
                                   atol=1e-5, rtol=0, msg=lambda m, k=key: f"{k}: {m}")


# Cached in-batch losses (GradCache): random sentences of 2-12 words, and the gradient tolerance, a few hundred
# fp32 ulps of the largest gradient entry (sums over a few hundred terms).
_rnd = random.Random(0)
GRADIENT_SENTENCES = [" ".join(_rnd.choice(WORDS) for _ in range(_rnd.randint(2, 12))) for _ in range(24)]
GRADIENT_TOL = 256 * torch.finfo(torch.float32).eps


def assert_same_gradients(got: dict, want: dict) -> None:
    """Same parameters, every gradient within ``GRADIENT_TOL`` of max(1, the largest entry of ``want``)."""
    assert got.keys() == want.keys() and want
    scale = max(1.0, max(g.abs().max().item() for g in want.values()))
    worst = max((got[k] - want[k]).abs().max().item() for k in want)
    assert worst <= GRADIENT_TOL * scale, f"largest gradient difference {worst:.3g} (scale {scale:.3g})"


# Pairs to mine hard negatives from (tests/datamodules/test_hard_negatives.py, tests/runs/test_mine_negatives.py):
# 24 pairs, some anchors with two positives, one positive shared by two anchors (both are de-duplicated).
_mining_rnd = random.Random(3)
_MINING = [" ".join(_mining_rnd.choice(WORDS) for _ in range(_mining_rnd.randint(3, 9))) for _ in range(40)]
MINING_ANCHORS = _MINING[:20] + _MINING[:3] + [_MINING[20]]
MINING_POSITIVES = _MINING[21:40] + [_MINING[21]] + _MINING[37:40] + [_MINING[22]]


class Killed(RuntimeError):
    """Stands in for the process dying mid-epoch (the datamodules' exact-resume tests)."""


def kill_at(step: int):
    """A Lightning callback raising ``Killed`` before optimizer step ``step``: a run stopped mid-epoch, in process."""
    from lightning.pytorch.callbacks import Callback

    class KillAt(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == step:
                raise Killed(f"before step {step}")

    return KillAt()


def anchor_recorder():
    """A LightningModule recording the anchors of every training batch in ``.seen`` (one trivial parameter, so the
    optimizer has something to step): what a loader fed, in order, through a real Trainer."""
    from lightning.pytorch import LightningModule

    class AnchorRecorder(LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.seen: list[list[str]] = []

        def training_step(self, batch, batch_idx):
            self.seen.append(batch["anchors"])
            return (self.w - 1).pow(2).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return AnchorRecorder()

