"""The one timing helper of the small benchmark scripts (run them from the repository root)."""

import time


def best_of(function, repeats):
    """The fastest of ``repeats`` calls of ``function()``, in seconds, after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)
