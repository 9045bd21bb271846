"""``CachedLoss``: the opt-in that lets ``model.mini_batch_size`` cache a method's in-batch loss (GradCache).

A method whose loss scores every sentence of the batch against every other computes it through ``embed_and_loss``
/ ``views_and_loss`` and lists ``CachedLoss`` after ``EncoderModule`` in its bases (the config readers follow the
first base); ``EncoderModule`` refuses ``mini_batch_size`` for every other class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError
from sts_lightning.embeddings.methods.shared.grad_cache import EncoderView, cached_loss, chunk_ids
from sts_lightning.lightning_modules.length_buckets import embed_length_buckets


def uncached(method: str, mini_batch_size: object) -> ConfigError:
    """The line for a method that has no in-batch loss to cache."""
    return ConfigError(f"model.mini_batch_size={mini_batch_size!r} is not allowed: {method} has "
                       "no in-batch loss to cache (use trainer.accumulate_grad_batches)")


class CachedLoss:
    """Mixin of an ``EncoderModule`` whose loss goes through ``embed_and_loss`` / ``views_and_loss``."""

    def view(self, ids: Sequence[Sequence[int]]) -> EncoderView:
        """Tokenized sentences as ``embed_ids`` sees them; a method whose ``embed_ids`` adds a head overrides this
        too, folding the head into ``pool``, so the cached path embeds what the uncached one does."""
        return EncoderView(self._live_encoder(), self.pool, ids)

    def embed_and_loss(self, ids: Sequence[Sequence[int]], loss_fn: Callable[[Tensor], Tensor]) -> Tensor:
        """``loss_fn(self.embed_ids(ids))``, cached when ``mini_batch_size`` is set."""
        if self.hparams.mini_batch_size is None:
            return loss_fn(self.embed_ids(ids))
        return self.views_and_loss([self.view(ids)], loss_fn)

    def views_and_loss(self, views: Sequence[EncoderView], loss_fn: Callable[..., Tensor]) -> Tensor:
        """``loss_fn(*embeddings of views)``, uncached or the GradCache surrogate (same value and gradients)."""
        size = self.hparams.mini_batch_size
        if size is None:
            return loss_fn(*(embed_length_buckets(v.encoder, v.pool, v.ids, self.forward_groups()) for v in views))
        chunks = [chunk_ids(v.encoder, v.pool, v.ids, size) for v in views]
        return cached_loss(chunks, loss_fn, list(self.parameters()))
