"""Sentence-BERT trained on NLI (Reimers & Gurevych 2019): its objective is ``objective.py``."""
