"""Claim builders, one module per mechanism family; each mechanism class calls its own."""
