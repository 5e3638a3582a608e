"""Chat model providers."""
