"""Hydra finds this package when it first looks for plugins (its ``hydra_plugins`` namespace) and imports it: the
import registers the constructors' defaults as ``constructor/<Class>`` config nodes
(``sts_lightning.runs.constructor_defaults``), so every composition in the process, ours or a user's own Hydra app,
can name them in a defaults list. Installed with the package (setup.py); a checkout has it on the path from its root.
"""
from sts_lightning.runs.constructor_defaults import register

register()
