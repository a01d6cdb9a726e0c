"""Torch models trained by private algorithms, many independent trials at once.

``networks`` holds the built-in models and the per-example gradients of a
model stacked over a trial axis (``torch.func``); ``data`` loads real
datasets; ``training`` runs DP-SGD and DP-LSSGD on a tile of trials;
``mechanism`` is the mechanism class ``model`` with its claims.
"""
