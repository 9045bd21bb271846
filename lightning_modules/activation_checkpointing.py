"""Gradient (activation) checkpointing of a Hugging Face encoder: ``model.gradient_checkpointing=true``.

Why: only each transformer layer's input is kept and the layer recomputed in the backward pass (about one more
forward pass for activation memory of ~one layer); it composes with the cached in-batch losses (``grad_cache``:
those bound memory by the mini-batch, this by the layer). Non-reentrant (``use_reentrant=False``): the reentrant
variant refuses ``torch.autograd.grad``, which the cached losses use. The RNG is restored, so dropout draws the
same masks in the recomputation.
"""

from __future__ import annotations

from sts_lightning.embeddings.errors import ConfigError


def enable_gradient_checkpointing(model) -> None:
    """Checkpoint every transformer layer of ``model``; ``ConfigError`` where transformers has none (e.g. MPNet)."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(f"model.gradient_checkpointing=true: {type(model).__name__} does not support gradient "
                          "checkpointing in transformers; set model.gradient_checkpointing=false")
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    # transformers also hooks the input embeddings to require gradients: only the reentrant variant needs it
    model.disable_input_require_grads()


def checkpoint_in_eval_mode(model) -> None:
    """Keep checkpointing on in eval mode (dropout off), which transformers skips outside ``training``.

    CT trains with dropout off via eval mode, and ``GradientCheckpointingLayer`` checkpoints only when ``training``:
    the flag is set on those layer objects alone, so every dropout stays in eval mode.
    """
    from transformers.modeling_layers import GradientCheckpointingLayer

    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer) and module.gradient_checkpointing:
            module.training = True
