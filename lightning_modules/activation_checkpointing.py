"""Gradient (activation) checkpointing of a Hugging Face encoder (``model.gradient_checkpointing=true``): each layer
recomputed in the backward pass, about one more forward pass for the activation memory of ~one layer.
Non-reentrant: the reentrant variant refuses ``torch.autograd.grad``, which the cached losses (``grad_cache``) use.
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
    """Keep checkpointing on in eval mode (CT's dropout off): ``GradientCheckpointingLayer`` checkpoints only when
    ``training``, so the flag is set on those layers alone and every dropout stays in eval mode."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer) and module.gradient_checkpointing:
            module.training = True
