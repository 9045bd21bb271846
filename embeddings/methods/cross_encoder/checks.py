"""The cross-encoder's config check before torch loads: its objective must match the data it reads."""

from __future__ import annotations

from sts_lightning.embeddings.errors import ConfigError


def check_objective_data(cfg) -> None:
    """``nli`` reads labelled NLI pairs (``data=nli``); ``bce`` / ``mse`` read gold scores (``data=scored_pairs``
    and its kin): a mismatch is one line, not a ``KeyError`` at the first batch."""
    objective = (cfg.get("model") or {}).get("objective", "bce")
    target = str((cfg.get("data") or {}).get("_target_", ""))
    nli_data = target.endswith(".NLIDataModule")
    if objective == "nli" and not nli_data:
        raise ConfigError("model.objective=nli reads labelled NLI pairs: add data=nli (e.g. data.sources=[snli:dev])")
    if objective != "nli" and nli_data:
        raise ConfigError(f"model.objective={objective} regresses gold similarity scores, and data=nli has labels: "
                          "use model.objective=nli, or data=scored_pairs")
