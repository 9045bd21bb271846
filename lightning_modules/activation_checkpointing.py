"""Gradient (activation) checkpointing of a Hugging Face encoder: ``model.gradient_checkpointing=true``.

Why: a training forward pass keeps every layer's activations for the backward pass; checkpointing keeps
only each transformer layer's input and recomputes the layer during the backward pass (about one more
forward pass of compute for activation memory ~ one layer instead of all). It composes with the cached
in-batch losses (``embeddings.methods.shared.grad_cache``): those bound the memory by the mini-batch, this by the layer.

Non-reentrant checkpointing (``use_reentrant=False``, transformers' default in 5.x, set explicitly here):
the reentrant variant refuses ``torch.autograd.grad`` (which the cached losses use) and needs inputs that
require gradients. ``torch.utils.checkpoint`` saves and restores the RNG state, so dropout's masks are the
same in the recomputation.
"""

from __future__ import annotations

from sts_lightning.embeddings.errors import ConfigError


def enable_gradient_checkpointing(model) -> None:
    """Checkpoint every transformer layer of ``model`` (a transformers ``PreTrainedModel``).

    Raises:
        ConfigError: the architecture has no checkpointing in transformers (e.g. MPNet).
    """
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(f"model.gradient_checkpointing=true: {type(model).__name__} does not support gradient "
                          "checkpointing in transformers; set model.gradient_checkpointing=false")
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    # transformers also hooks the input embeddings to require gradients: only the reentrant variant needs it
    model.disable_input_require_grads()


def checkpoint_in_eval_mode(model) -> None:
    """Keep checkpointing on in eval mode (dropout off), which transformers skips outside ``training``.

    Why: Contrastive Tension trains with dropout OFF by putting the encoder in eval mode, and transformers'
    ``GradientCheckpointingLayer`` checkpoints only when the layer itself is ``training``. Setting the flag
    on those layer objects alone (not their children) turns checkpointing back on while every dropout and
    attention module stays in eval mode. A no-op where checkpointing is off.
    """
    from transformers.modeling_layers import GradientCheckpointingLayer

    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer) and module.gradient_checkpointing:
            module.training = True
