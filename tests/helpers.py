"""Plain helpers that several test modules share (fixtures live in conftest.py).

Why a module of its own: a test module that imports another one runs the other's module-level code and ties
the two files together, so moving or renaming one breaks the other. Shared code lives here instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

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
