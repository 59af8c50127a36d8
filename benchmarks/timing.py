"""The timing helpers of the small benchmark scripts (run them from the repository root)."""

import statistics
import time


def _times(function, repeats, warm_up=1):
    for _ in range(warm_up):
        function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def best_of(function, repeats):
    """The fastest of ``repeats`` calls of ``function()``, in seconds, after one warm-up call."""
    return min(_times(function, repeats))


def median_of(function, repeats, warm_up=5):
    """The median of ``repeats`` calls of ``function()``, in seconds, after ``warm_up`` calls."""
    return statistics.median(_times(function, repeats, warm_up))
