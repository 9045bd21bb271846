"""BERT-flow's scorer: frozen pooled vector -> Glow latent ``z``, compared by cosine; its export format, which
references the frozen encoder (training never changed it) and refuses another one."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from sts_lightning.embeddings.encoders.base import BaseEncoder
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.io.encoder_identity import check_fitted_on
from sts_lightning.embeddings.io.export_dir import ExportFormat, load_export, load_export_config, save_export
from sts_lightning.embeddings.io.model_card import ExportNotes
from sts_lightning.embeddings.methods.flow import METHOD
from sts_lightning.embeddings.methods.flow.glow import Glow
from sts_lightning.embeddings.methods.pooling import get_pooling
from sts_lightning.embeddings.scoring.reading import Reading, pooled_reading
from sts_lightning.embeddings.scoring.scorer import Representation, VectorScorer

log = logging.getLogger(__name__)

FORMAT = METHOD.export  # "sts-lightning/bert-flow", declared once (flow/__init__.py)
FORMAT_VERSION = 1
CONFIG_FILE, WEIGHTS_FILE = "flow_config.json", "flow.safetensors"
EXPORT_FORMAT = ExportFormat(FORMAT, FORMAT_VERSION, CONFIG_FILE, WEIGHTS_FILE, "BERT-flow")
FLOW_KEYS = ("levels", "depth", "hidden", "coupling", "permutation")
BERT_FLOW = METHOD.card()


class FlowScorer(VectorScorer):
    """Pools with the frozen encoder (``pooling``: the one the training used), maps the vectors through the flow."""

    def __init__(self, encoder: BaseEncoder, flow: Glow, pooling: str = "first_last_avg",
                 batch_size: int | None = None) -> None:
        if flow.dim != encoder.hidden_size:
            raise ConfigError(f"the flow maps {flow.dim}-d vectors but encoder {encoder.name} gives "
                              f"{encoder.hidden_size}-d ones")
        self.encoder, self.flow, self.pooling = encoder, flow, pooling
        self.pool_fn = get_pooling(pooling)
        self.batch_size = batch_size
        self.name = f"flow-{pooling}"

    def reading(self) -> Reading:
        """The pooled vector the flow maps: computed once with the pooling scorers (``shared_pass``)."""
        return pooled_reading(self.pooling, self.pool_fn)

    def represent(self, sentences: Sequence[str]) -> Representation:
        return self.from_pooled(self.encoder.encode(sentences, self.pool_fn, batch_size=self.batch_size,
                                                    desc=f"{self.name} encode"))  # type: ignore[arg-type]

    def from_pooled(self, emb: torch.Tensor) -> Representation:
        """``{"embedding": z}``: the flow's image of pooled vectors ``(n, d)``."""
        param = next(self.flow.parameters())
        was_training = self.flow.training
        self.flow.eval()  # never let ActNorm's data-dependent init run on evaluation sentences
        try:
            with torch.inference_mode(), torch.autocast(device_type=param.device.type, enabled=False):
                z, _ = self.flow(emb.to(device=param.device, dtype=param.dtype))  # float32, like training
        finally:
            self.flow.train(was_training)
        return {"embedding": z.float().cpu()}


def save_flow_export(path: str | os.PathLike, flow: Glow, config: Mapping, note: ExportNotes | None = None) -> Path:
    """Write ``flow_config.json`` + ``flow.safetensors`` (and ``note``) to ``path`` atomically."""
    missing = {"model_name_or_path", "pooling", "max_length", *FLOW_KEYS} - set(config)
    if missing:
        raise ConfigError(f"flow export config lacks {sorted(missing)}")
    if not flow.initialized:
        log.warning("exporting a flow whose ActNorm layers were never initialised (it was not trained)")
    target = save_export(path, EXPORT_FORMAT, {"dim": flow.dim, **dict(config)}, flow.state_dict(), note)
    log.info("exported flow to %s", target)
    return target


def load_flow(path: str | os.PathLike) -> tuple[Glow, dict]:
    """The Glow (eval mode, CPU) and the config of an export directory."""
    config, state = load_export(path, EXPORT_FORMAT)
    flow = Glow(int(config["dim"]), **{k: config[k] for k in FLOW_KEYS})
    flow.load_state_dict(state)
    return flow.eval(), config


def load_flow_scorer(path: str | os.PathLike, encoder: BaseEncoder | None = None, device: str = "cpu",
                     batch_size: int | None = None, allow_other_encoder: bool = False) -> FlowScorer:
    """Rebuild the scorer of an export directory (``encoder``: one to reuse; ``None`` loads the recorded one)."""
    if encoder is None:
        config = load_export_config(path, EXPORT_FORMAT)
        encoder = load_encoder(config["model_name_or_path"], max_length=config["max_length"],
                               batch_size=batch_size or 64, device=device)
    return FlowExportScorer(encoder, str(path), batch_size=batch_size, allow_other_encoder=allow_other_encoder)


class FlowExportScorer(FlowScorer):
    """Registry entry ``{name: flow, path: <export dir>}``: a flow export on the configured encoder (``check_fitted_on``)."""

    def __init__(self, encoder: BaseEncoder, path: str, batch_size: int | None = None,
                 allow_other_encoder: bool = False) -> None:
        flow, config = load_flow(path)
        check_fitted_on(config.get("encoder"), encoder, EXPORT_FORMAT.describe(path), allow_other_encoder,
                        width=int(config["dim"]))
        super().__init__(encoder, flow.to(encoder.device), pooling=config["pooling"], batch_size=batch_size)
