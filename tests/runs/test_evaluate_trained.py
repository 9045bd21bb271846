"""evaluate.py on what train.py produces: a ``.ckpt``, an export directory, a BERT-flow export."""

from __future__ import annotations

import pytest
import torch

from sts_lightning.embeddings.scoring.registry import build_scorer
from sts_lightning.embeddings.scoring.shared_pass import share_forward_pass
from tests.helpers import compose_evaluate_config


def test_checkpoint_and_export_score_the_same(tmp_path, trained, tiny_data_dir):  # noqa: F811
    from sts_lightning.runs.evaluate_run import evaluate

    _, _, out = trained
    ckpt, export = out / "checkpoints" / "last.ckpt", out / "export"
    results = evaluate(compose_evaluate_config(tmp_path, [f"encoders=[{ckpt},{export}]", "scorers=[mean]", "tasks=[stsb-dev]",
                                       f"paths.data_dir={tiny_data_dir}", "encoder.max_length=32"]))
    from_ckpt, from_export = (r["tasks"]["stsb-dev"]["all"]["spearman"] for r in results)
    assert from_ckpt == pytest.approx(from_export, abs=1e-6)


def test_bad_checkpoint_is_a_clear_error(tmp_path):
    from sts_lightning.embeddings.encoders.load import load_encoder
    from sts_lightning.embeddings.errors import ConfigError

    bad = tmp_path / "x.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}}, bad)
    with pytest.raises(ConfigError, match="not a checkpoint of a trained encoder"):
        load_encoder(str(bad))


def test_flow_export_scores_through_the_registry_and_shares_the_pass(tmp_path, tiny_encoder):
    from sts_lightning.embeddings.methods.flow.glow import Glow
    from sts_lightning.embeddings.methods.flow.scorer import load_flow_scorer, save_flow_export

    torch.manual_seed(0)
    flow = Glow(32, levels=2, depth=1, hidden=8)
    flow.train()
    flow(torch.randn(16, 32))  # ActNorm's data-dependent init
    config = {"model_name_or_path": "tiny", "pooling": "first_last_avg", "max_length": 32, "levels": 2,
              "depth": 1, "hidden": 8, "coupling": "affine", "permutation": "lu"}
    save_flow_export(tmp_path / "flow", flow, config)
    scorer = build_scorer({"name": "flow", "path": str(tmp_path / "flow")}, tiny_encoder)
    direct = load_flow_scorer(tmp_path / "flow", encoder=tiny_encoder)
    s1, s2 = ["a man plays a guitar .", "a dog runs ."], ["a man plays the piano .", "a cat sits ."]
    torch.testing.assert_close(scorer.score_pairs(s1, s2), direct.score_pairs(s1, s2))
    poolings = [build_scorer(name, tiny_encoder) for name in ("mean", "max")]
    shared = share_forward_pass(tiny_encoder, [*poolings, scorer], [*s1, *s2])
    assert shared[0] is not poolings[0] and shared[2] is not scorer  # the flow reads the poolings' pass (issue 38)
    torch.testing.assert_close(shared[2].score_pairs(s1, s2), scorer.score_pairs(s1, s2), rtol=0, atol=0)


def test_latte_mix_export_scores_through_evaluate(tmp_path, tiny_model_dir, tiny_data_dir):
    """A token-VAE export is a scorer spec ``{name: latte_mix, path, distance}`` on its own encoder."""
    from sts_lightning.embeddings.methods.latte_mix.scorer import load_token_vae_scorer
    from sts_lightning.lightning_modules.latte_mix import LatteMixModule
    from sts_lightning.runs.evaluate_run import evaluate
    from sts_lightning.sts.scoring import main_score, score_tasks
    from sts_lightning.sts.tasks import load_task

    module = LatteMixModule(str(tiny_model_dir), latent_dim=4, num_classes=5, hidden_dim=16, max_length=32)
    module.export(tmp_path / "vae")
    spec = f"{{name:latte_mix,path:{tmp_path / 'vae'},distance:js}}"
    results = evaluate(compose_evaluate_config(tmp_path, [f"encoders=[{tiny_model_dir}]", f"scorers=[mean,{spec}]", "tasks=[stsb-dev]",
                                       f"paths.data_dir={tiny_data_dir}", "encoder.max_length=32"]))
    by_scorer = {r["scorer"]: r["tasks"]["stsb-dev"]["all"]["spearman"] for r in results}
    direct = load_token_vae_scorer(tmp_path / "vae", distance="js")
    expected = main_score(score_tasks(direct, [load_task("stsb-dev", tiny_data_dir)])["stsb-dev"])
    assert len(by_scorer) == 2 and by_scorer["latte_mix"] == pytest.approx(expected, abs=1e-6)
