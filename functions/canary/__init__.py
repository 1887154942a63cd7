"""The canary: resolves a known IBI end to end, as a reader would, every few minutes."""
