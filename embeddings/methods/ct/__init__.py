"""Contrastive Tension (Carlsson et al., ICLR 2021): its pair sampling and objectives are ``objective.py``."""
