"""Supervised STS on scored pairs (CoSENT / AnglE / CosineSimilarityLoss): its objectives are ``objective.py``."""
