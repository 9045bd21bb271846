"""Imported by Hydra's plugin discovery: registers the constructors' defaults as ``constructor/<Class>`` config
nodes (``runs.constructor_defaults``), so any composition in the process, a user's own Hydra app too, can name them.
"""
from sts_lightning.runs.constructor_defaults import register

register()
