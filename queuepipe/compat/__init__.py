"""Compatibility layers. ``queuepipe.compat.v1`` runs TF1 input code with its import line
changed to ``import queuepipe.compat.v1 as tf``."""
