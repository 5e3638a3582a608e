"""Drivers for peer frameworks; each runs in the peer's own virtual environment."""
