"""Each student's own variants, measured: how often students share them, and how far a derived backward
pass's time is from a numerical one's on the timed case.

    python benchmarks/variants.py

1. The draw: for classes of 30, 100 and 300 made-up roster names and 200 secrets each, the share of
   students who have a classmate with the same variant of a family (one family, then all of them).
2. The timed case of every backward pass: the lesson's own solution (the instructor edition's, a
   derived backward pass) and a numerical gradient of the same forward (central differences, every
   input entry) of a variant's forward (the lesson's forward calls npformer, which the worker refuses),
   each timed in the grading worker as ``check`` runs them, against its forward's time.
"""

from __future__ import annotations

import functools
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def shared_rates(class_sizes=(30, 100, 300), secrets=100) -> None:
    from npformer.course.variants import FAMILIES, assignment
    print(f"the draw, over {secrets} secrets a class size:")
    print(f"| class size | two students share a family's variant | share at least half of the {len(FAMILIES)} "
          "families' | a student with a classmate of the very same variants |")
    print("|---:|---:|---:|---:|")
    for size in class_sizes:
        pairs = half = whole = 0.0
        for index in range(secrets):
            drawn = [tuple(assignment(f"secret {index}", f"student {number}").values()) for number in range(size)]
            same = [[sum(a == b for a, b in zip(mine, other)) for other in drawn] for mine in drawn]
            count = size * (size - 1)
            pairs += sum(same[i][j] for i in range(size) for j in range(size) if i != j) / count / len(FAMILIES)
            half += sum(same[i][j] >= len(FAMILIES) / 2 for i in range(size) for j in range(size) if i != j) / count
            whole += sum(any(same[i][j] == len(FAMILIES) for j in range(size) if j != i) for i in range(size)) / size
        print(f"| {size} | {pairs / secrets:.1%} | {half / secrets:.3%} | {whole / secrets:.2%} |")


def timed_ratios() -> None:
    from npformer.course import check
    from npformer.course.exercises import EXERCISES
    from npformer.course.variants import FAMILY_OF, timed
    from npformer.course import grader
    from lesson_solutions import solution
    from numerical_student import numerical_backward
    import inspect

    seen = {}
    original = timed.too_slow

    def spy(seconds, forward):
        seen["ratio"] = (seconds, forward)
        return original(seconds, forward)
    grader.timed.too_slow = spy
    print("\n| backward pass | timed case | forward | derived: time, x forward | numerical: time, x forward |")
    print("|---|---|---:|---:|---:|")
    for name in sorted(timed.LARGE):
        exercise = EXERCISES[name]
        label = timed.timed_case(exercise, 1)[0].label.split(": ", 1)[1]
        check(name, solution(name), strict=False, unseen_seed=1)
        derived = seen.pop("ratio")
        variant = next(variant for variant in FAMILY_OF[name].variants if "erfc" not in
                       variant.forward_of(name).__code__.co_names and variant.name != "wide")
        inputs = list(inspect.signature(exercise.forward).parameters)
        student = functools.partial(numerical_backward, variant.forward_of(name),
                                    [inputs.index(w) for w in exercise.wrt])
        check(name, student, strict=False, unseen_seed=1, time_limit=120, variant=variant.name)
        numerical = seen.pop("ratio", (float("nan"), derived[1]))
        print(f"| {name} | {label} | {derived[1] * 1e6:.0f} us | {derived[0] * 1e3:.2f} ms, "
              f"{derived[0] / derived[1]:.0f}x | {numerical[0]:.2f} s, {numerical[0] / numerical[1]:,.0f}x |")


if __name__ == "__main__":
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"{cpu}, Python {platform.python_version()}\n")
    shared_rates()
    timed_ratios()
