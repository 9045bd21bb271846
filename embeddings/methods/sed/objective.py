"""Sentence Ensemble Distillation's objective (Carlsson & Sahlgren 2021): MSE of the student's vector onto the
precomputed mean of N frozen teachers' (Eq. 1-2); rows are self-contained (no DDP gather).
"""

from __future__ import annotations

from torch import Tensor

from sts_lightning.embeddings.errors import ConfigError

__all__ = ["check_dims", "sed_loss"]


def sed_loss(student: Tensor, target: Tensor) -> Tensor:
    """Mean squared error over batch and dimensions of ``(batch, dim)`` student vectors and constant targets (Eq. 2)."""
    if student.shape != target.shape:
        raise ConfigError(f"SED loss needs equal shapes, got student {tuple(student.shape)} and "
                          f"target {tuple(target.shape)}")
    return ((student - target) ** 2).mean()


def check_dims(student_dim: int, target_dim: int) -> None:
    """Fail with what to change when the student cannot regress onto the teachers' mean."""
    if int(student_dim) != int(target_dim):
        raise ConfigError(f"the student gives {student_dim}-d vectors but the teachers' mean is {target_dim}-d: "
                          f"choose a student of the teachers' size, or a meta-embedding with d={student_dim}")
