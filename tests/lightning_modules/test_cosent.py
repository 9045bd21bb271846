"""``model=cosent``: bad options fail in one line before any model loads, each objective trains (its loss falls
on a batch it steps on), the step computes the objective's pure function on one pass over both sides, and the
card names the objective's paper."""

from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_dir

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.cosent.objective import (
    angle_full_loss,
    angle_loss,
    cosent_loss,
    cosine_similarity_loss,
)
from sts_lightning.lightning_modules.cosent import OBJECTIVES, CoSENTModule
from tests.paths import CONFIG_DIR

BATCH = {"sentences1": ["a man plays a guitar .", "a dog runs in the park .", "a child reads a book .",
                        "a girl rides a horse ."],
         "sentences2": ["a man plays the piano .", "a dog is running in the park .", "two cats eat food .",
                        "a boy rides a bike ."],
         "scores": torch.tensor([0.64, 0.96, 0.04, 0.3])}


@pytest.mark.parametrize("options, match", [({"objective": "triplet"}, "unknown model.objective 'triplet'"),
                                             ({"scale": 0.0}, "model.scale=0.0"),
                                             ({"scale": float("nan")}, "model.scale=nan"),
                                             ({"scale": "20"}, "model.scale='20'"),
                                             ({"ibn_w": -1.0}, "model.ibn_w=-1.0"),
                                             ({"angle_tau": 0}, "model.angle_tau=0"),
                                             ({"cosine_w": 0, "ibn_w": 0, "angle_w": 0}, "all 0")])
def test_bad_options_fail_before_the_model_loads(options, match):
    with pytest.raises(ConfigError, match=match):
        CoSENTModule("/nonexistent/model", **options)  # the path would fail next: the option is checked first


@pytest.mark.parametrize("override, match", [("model.scale=-1", "model.scale=-1"),
                                              ("model.objective=mnrl", "unknown model.objective 'mnrl'"),
                                              ("model.cosine_tau=-20", "model.cosine_tau=-20"),
                                              ("data.sources=[stsb:train,snli:dev]", "snli:dev")])
def test_train_refuses_bad_values_in_one_line(override, match, tmp_path, tiny_model_dir):
    """Each mistake is named before the model or any data loads (the backbone exists: its check passes)."""
    from sts_lightning.runs.train_run import train
    from tests.helpers import compose_train_config

    cfg = compose_train_config(tmp_path / "run", tiny_model_dir, tmp_path / "no_data", ["model=cosent", override])
    with pytest.raises(ConfigError, match=match) as err:
        train(cfg)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def modules(tiny_model_dir):
    return {o: CoSENTModule(str(tiny_model_dir), max_length=32, objective=o, lr=1e-3) for o in OBJECTIVES}


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_step_is_the_pure_loss_on_one_pass(modules, objective, one_thread):
    module = modules[objective].eval()  # no dropout: the same vectors twice
    with torch.no_grad():
        u, v = module(BATCH["sentences1"], BATCH["sentences2"])
        both = module.embed([*BATCH["sentences1"], *BATCH["sentences2"]])
        torch.testing.assert_close(torch.cat([u, v]), both)
        fn = {"cosent": cosent_loss, "angle": angle_loss, "angle_full": angle_full_loss,
              "cosine": cosine_similarity_loss}[objective]
        module.log = lambda *args, **kwargs: None
        torch.testing.assert_close(module.training_step(BATCH, 0), fn(u, v, BATCH["scores"]))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_few_steps_lower_the_loss(modules, objective, one_thread):
    module = modules[objective].eval()  # dropout off: the loss moves by the updates alone
    module.log = lambda *args, **kwargs: None
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    losses = []
    for _ in range(8):
        loss = module.training_step(BATCH, 0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


def test_wrong_batch_names_the_data_group(modules):
    with pytest.raises(ConfigError, match="data=scored_pairs"):
        modules["cosent"].training_step({"sentences1": ["a"], "sentences2": ["b"], "labels": torch.tensor([0])}, 0)


def test_card_names_the_objectives_paper(modules):
    assert modules["angle"].method_info.paper.url == "https://arxiv.org/abs/2309.12871"
    assert "CoSENT" in modules["cosent"].method_info.paper.title
    assert {m.method_info.key for m in modules.values()} == {"cosent"}


def test_defaults_are_the_sentence_transformers_sts_b_recipe():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["model=cosent", "paths.data_dir=/data"])
    assert cfg.data._target_.endswith("ScoredPairsDataModule") and list(cfg.data.sources) == ["stsb:train"]
    assert (cfg.data.batch_size, cfg.model.lr, cfg.model.warmup_ratio, cfg.trainer.max_epochs) == (16, 2e-5, 0.1, 4)
    assert (cfg.model.pooling, cfg.model.objective, cfg.model.scale) == ("mean", "cosent", 20.0)
    assert cfg.callbacks.sts_evaluation.every_n_epochs == 1 and list(cfg.callbacks.sts_evaluation.tasks) == ["stsb-dev"]


def test_matryoshka_step_sums_the_objective_over_the_prefixes(tiny_model_dir, one_thread):
    from sts_lightning.embeddings.methods.shared.matryoshka import shrink

    module = CoSENTModule(str(tiny_model_dir), max_length=32, objective="angle_full", matryoshka_dims=[32, 8],
                          matryoshka_weights=[1.0, 0.5]).eval()
    module.log = lambda *args, **kwargs: None
    with torch.no_grad():
        u, v = module(BATCH["sentences1"], BATCH["sentences2"])
        want = sum(w * angle_full_loss(shrink(u, d), shrink(v, d), BATCH["scores"]) for d, w in ((32, 1.0), (8, 0.5)))
        torch.testing.assert_close(module.training_step(BATCH, 0), want)


@pytest.mark.parametrize("options, match", [({"matryoshka_dims": [16, 32]}, "strictly decreasing"),
                                             ({"matryoshka_dims": [64, 16]}, "64 is larger than the model's"),
                                             ({"matryoshka_dims": [16], "matryoshka_weights": [1, 2]},
                                              "model.matryoshka_weights")])
def test_bad_matryoshka_values_name_the_key(tiny_model_dir, options, match):
    with pytest.raises(ConfigError, match=match):
        CoSENTModule(str(tiny_model_dir), **options)
