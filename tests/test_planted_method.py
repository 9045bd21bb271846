"""A new method is its declaration folder and its model file: the generic tests pick it up with no list to extend.

Plants ``embeddings/methods/planted/__init__.py`` (on the methods package's search path) and
``configs/model/planted.yaml`` (on a Hydra search path) in a temporary folder, then asks each generic test's
parametrization for its cases: the model-default, fast_dev_run, export round-trip, model-card and DDP tests all
return the planted method, with its declared tiny settings, and its model file passes the model-default check.
Nothing is trained (the real tests train every declared method), so this stays fast.
"""

from __future__ import annotations

from sts_lightning.embeddings.methods.registry import method, trained_methods
from tests.method_cases import (
    check_model_file,
    ddp_cases,
    export_cases,
    fast_dev_run_options,
    model_names,
    planted_method,
    st_export_names,
    tiny_overrides,
)
from tests.paths import CONFIG_DIR

DECLARATION = '''from sts_lightning.embeddings.methods.declaration import ST_EXPORT, MethodDeclaration, Tiny

METHOD = MethodDeclaration(
    name="planted", title="Planted", kind="trained", summary="a planted copy of SBERT-NLI",
    export=ST_EXPORT, data="nli", module="sts_lightning.lightning_modules.sbert_nli:SBERTNLIModule",
    tiny=Tiny(data=("data.sources=[snli:dev]",), options=(("model.pooling=cls",),), ddp={"": ()}),
)
'''


def test_a_planted_method_is_picked_up_by_every_generic_test(tmp_path):
    configs = tmp_path / "configs"
    (configs / "model").mkdir(parents=True)
    text = (CONFIG_DIR / "model" / "sbert_nli.yaml").read_text().replace("SBERT", "Planted", 1)
    (configs / "model" / "planted.yaml").write_text(text)
    with planted_method(tmp_path / "methods", "planted", DECLARATION):
        assert method("planted") in trained_methods()
        assert "planted" in model_names()  # test_model_defaults, test_model_cards, test_bf16_training, ...
        assert ["model=planted", "model.pooling=cls"] in fast_dev_run_options()  # test_fast_dev_run
        assert "planted" in st_export_names()  # test_model_cards: SentenceTransformer loads its export
        assert ddp_cases()["planted"] == ("planted", ())  # test_ddp_train
        assert tiny_overrides("planted", "nli", "/m", tmp_path) == ["data.sources=[snli:dev]"]
        check_model_file("planted", configs)  # test_model_defaults: data group and module as declared
        ids = {case.id for case in export_cases((f"hydra.searchpath=[file://{configs}]",))}
        assert {"planted", "planted-cls"} <= ids  # test_export_roundtrip, each pooling its config offers
    assert "planted" not in model_names()
