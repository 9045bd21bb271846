"""CT's options on the module (lightning_modules.ct, ct_options): span words need halves, frozen bottom layers,
word embeddings only, length-matched groups."""

from __future__ import annotations


def test_span_words_needs_halves():
    import pytest

    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    with pytest.raises(ConfigError, match="span_words"):
        ContrastiveTensionModule(model_name_or_path="unused", views="identical", span_words=8)


def test_frozen_layers_freeze_embeddings_and_bottom_layers_of_both_copies(tiny_model_dir):
    import pytest

    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    module = ContrastiveTensionModule(model_name_or_path=str(tiny_model_dir), frozen_layers=1)
    for model in (module.encoder_model, module.encoder2_model):
        trainable = {n.split(".")[0] + "." + n.split(".")[2] if n.startswith("encoder.layer") else n.split(".")[0]
                     for n, p in model.named_parameters() if p.requires_grad}
        assert trainable == {"encoder.1"}  # the top layer of the 2-layer model only (pooler is unused)
    groups = module._param_groups()
    assert sum(len(g["params"]) for g in groups) == 2 * len(list(module.encoder_model.encoder.layer[1].parameters()))
    with pytest.raises(ConfigError, match="frozen_layers"):
        ContrastiveTensionModule(model_name_or_path=str(tiny_model_dir), frozen_layers=2)


def test_trainable_word_embeddings_leaves_only_the_word_rows_of_both_copies_to_the_optimizer(tiny_model_dir):
    import pytest

    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    module = ContrastiveTensionModule(model_name_or_path=str(tiny_model_dir), trainable="word_embeddings")
    for model in (module.encoder_model, module.encoder2_model):
        assert [n for n, p in model.named_parameters() if p.requires_grad] == ["embeddings.word_embeddings.weight"]
    trained = [p for g in module._param_groups() for p in g["params"]]
    assert len(trained) == 2 and trained[0] is not trained[1]
    assert trained[0].data_ptr() != trained[1].data_ptr()  # two independent copies, not one shared matrix
    with pytest.raises(ConfigError, match="trainable"):
        ContrastiveTensionModule(model_name_or_path=str(tiny_model_dir), trainable="layers")
    with pytest.raises(ConfigError, match="frozen_layers"):
        ContrastiveTensionModule(model_name_or_path=str(tiny_model_dir), trainable="word_embeddings", frozen_layers=0)


def test_length_matched_groups_split_a_batch_by_length_and_cover_every_sentence():
    import pytest

    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.lightning_modules.ct_options import length_matched_groups

    sentences = [" ".join(["w"] * n) for n in (9, 1, 7, 3, 5, 2, 8, 4)]
    groups = length_matched_groups(sentences, 2)
    assert sorted(int(i) for g in groups for i in g) == list(range(8))  # nothing lost or repeated
    assert [sorted(len(sentences[i].split()) for i in g) for g in groups] == [[1, 2, 3, 4], [5, 7, 8, 9]]
    assert [len(g) for g in length_matched_groups(sentences, 1)] == [8]
    with pytest.raises(ConfigError, match="length_groups"):
        length_matched_groups(sentences, 3)


def test_length_groups_apply_to_in_batch_only(tiny_model_dir):
    import pytest

    from sts_lightning.embeddings.errors import ConfigError
    from sts_lightning.lightning_modules.ct import ContrastiveTensionModule

    with pytest.raises(ConfigError, match="length_groups"):
        ContrastiveTensionModule(model_name_or_path=str(tiny_model_dir), objective="bce", length_groups=2)
