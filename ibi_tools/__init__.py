"""The tools around the Lambdas: the ``ibi`` command and local mode (``ibi local``).

Above ``functions/``: they may import any function's wiring; no Lambda asset carries them.
"""
