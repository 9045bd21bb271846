"""An encoder from a training checkpoint (``.ckpt``), so ``evaluate.py`` scores a run mid-training: our checkpoints
hold plain-scalar hyper-parameters, so the encoder is rebuilt without importing the LightningModule."""

from __future__ import annotations

from pathlib import Path

from sts_lightning.embeddings.encoders.hf import HFEncoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.checkpoint_file import load_checkpoint

# Contrastive Tension keeps two copies; ``selected_copy`` (1 or 2) says which one the run kept.
PREFIXES = {1: "encoder_model.", 2: "encoder2_model."}


def encoder_from_checkpoint(path: str | Path, max_length: int | None = None, batch_size: int | None = 64,
                            device: str = "cpu", precision: str = "fp32", **batching) -> HFEncoder:
    """The (kept) transformer of a checkpoint written by an ``EncoderModule`` subclass (``batching``:
    ``max_tokens`` / ``packing`` as for ``HFEncoder``)."""
    path = Path(path)
    ckpt = load_checkpoint(path)
    hp = ckpt.get("hyper_parameters") or {}
    state = ckpt.get("state_dict") or {}
    copy = int(state["selected_copy"]) if "selected_copy" in state else 1
    prefix = PREFIXES.get(copy, PREFIXES[1])
    weights = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    if "model_name_or_path" not in hp or not weights:
        raise ConfigError(f"{path}: not a checkpoint of a trained encoder (no model_name_or_path or no "
                          f"'{prefix}*' weights); a BERT-flow run is evaluated from its export with "
                          f"scorers=[{{name: flow, path: <export dir>}}]")
    encoder = HFEncoder.from_pretrained(hp["model_name_or_path"], max_length=max_length or hp.get("max_length"),
                                        batch_size=batch_size, device=device, name=path.name, precision=precision,
                                        **batching)
    missing, unexpected = encoder.model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ConfigError(f"{path}: weights do not fit {hp['model_name_or_path']}: missing {missing[:5]}, "
                          f"unexpected {unexpected[:5]}")
    encoder.model.to(encoder.device).eval()
    return encoder
