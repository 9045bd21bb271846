"""Sentence Ensemble Distillation (Carlsson & Sahlgren 2021): its objective is ``objective.py``."""
