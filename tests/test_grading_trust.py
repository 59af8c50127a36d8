"""A class graded with ``npformer course grade``, as an instructor would trust it: a complete student,
a partial one, one with classic mistakes and one who cheats. Every cheat scores zero on the
exercises it touches (the grader's answer is never in the process that runs the student's code);
honest work scores as it should. Also: the instructor's secret draws hidden cases that no report
shows, and the worker's guard, event by event."""

import csv
import shutil
import textwrap

import numpy as np
import pytest

from npformer.course import EXERCISES, check, grade_class, instructor_edition, student_edition
from npformer.course.cases import HIDDEN_CASES, hidden_cases, separable

from lesson_solutions import LESSONS, replace_solution


OPS_SOURCE = LESSONS.parent / "npformer" / "ops"


# Each cheat is a whole function body, written as a student who wants the points would write it.
CHEATS = {
    # the answer off the call stack: in the old grader, the caller's local ``expected``
    ("02_linear_and_relu.py", "relu_backward"): """
        import inspect
        for frame_info in inspect.stack():
            for name in ("expected", "expected_tensor", "item"):
                found = frame_info.frame.f_locals.get(name)
                if found is not None:
                    return found[0] if isinstance(found, tuple) else getattr(found, "expected", (found,))[0]
        return np.zeros_like(x)
    """,
    # the profile hook switched off, then npformer's own block
    ("03_softmax_and_cross_entropy.py", "softmax_backward"): """
        import sys
        sys.setprofile(None)
        sys.settrace(None)
        from npformer import nn, ops
        out, cache = ops.softmax_forward(x)
        return ops.softmax_backward(dout, cache)
    """,
    # npformer's reference recompiled from its source file, found beside numpy or on the path
    ("04_layer_normalization.py", "layernorm_backward"): f"""
        path = {str(OPS_SOURCE / "layernorm.py")!r}  # where npformer lies, as the student found out
        namespace = {{}}
        exec(compile(open(path).read(), path, "exec"), namespace)
        out, cache = namespace["layernorm_forward"](x, gamma, beta, eps)
        return namespace["layernorm_backward"](dout, cache)
    """,
    # a file the grader writes (its feedback, its CSV, its scratch files, its command line)
    ("02_linear_and_relu.py", "linear_backward"): """
        import os
        for name in sorted(os.listdir(os.getcwd())):  # the grader's working folder
            open(os.path.join(os.getcwd(), name)).read()
        with open(f"/proc/{os.getppid()}/cmdline") as file:
            return file.read()
    """,
    # npformer's answer re-wrapped, imported under another name
    ("07_scaled_dot_product_attention.py", "attention_backward"): """
        import functools, importlib
        ops = importlib.import_module("npform" + "er.ops")
        wrapped = functools.wraps(ops.attention_backward)(lambda *a: ops.attention_backward(*a))
        out, cache = ops.attention_forward(q, k, v, mask)
        return wrapped(dout, cache)
    """,
    # the garbage collector's view of the process, looking for arrays of the answer's shape
    ("05_positional_encoding.py", "embedding_backward"): """
        import gc
        for thing in gc.get_objects():
            if isinstance(thing, np.ndarray) and thing.shape == W.shape and thing is not W:
                return thing
        return np.zeros_like(W)
    """,
}

MISTAKES = {  # (lesson, exercise): a classic mistake's body
    ("02_linear_and_relu.py", "linear_backward"): "return dout @ W.T, x.reshape(-1, x.shape[-1]).T @ dout.reshape(-1, dout.shape[-1]), dout.sum(axis=0)",
    ("03_softmax_and_cross_entropy.py", "softmax_backward"): """
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        s = e / e.sum(axis=-1, keepdims=True)
        return s * (dout - (dout * s).sum(axis=0, keepdims=True))
    """,
    ("04_layer_normalization.py", "layernorm_backward"): """
        mean = x.mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
        x_hat = (x - mean) * rstd
        dx_hat = dout * gamma
        dx = rstd * (dx_hat - dx_hat.mean(axis=-1, keepdims=True))
        return dx, (dout * x_hat).reshape(-1, x.shape[-1]).sum(axis=0), dout.reshape(-1, x.shape[-1]).sum(axis=0)
    """,
}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("term")
    submissions = root / "submissions"
    instructor_edition(LESSONS, submissions / "complete")
    student_edition(LESSONS, submissions / "partial")
    for lesson in ("02_linear_and_relu.py", "06_masks.py"):  # two lessons done, the rest untouched
        shutil.copyfile(submissions / "complete" / lesson, submissions / "partial" / lesson)
    for student, bodies in (("mistakes", MISTAKES), ("cheater", CHEATS)):
        instructor_edition(LESSONS, submissions / student)
        for (lesson, name), body in bodies.items():
            replace_solution(submissions / student / lesson, name, body)
    secret = "a secret the students never see"
    out = root / "grades.csv"
    graded = grade_class(submissions, out, seed=5, secret=secret, timeout=20, reasons=True)
    rows = {row["student"]: row for row in csv.DictReader(out.open())}
    for row in rows.values():  # the grade sheet holds numbers only; the reasons are a grid of their own
        assert all(value.isdigit() for key, value in row.items() if key != "student"), row
    return rows, graded, root, secret


def test_honest_work_scores_as_it_should(graded_class):
    rows, _, _, _ = graded_class
    full = sum(exercise.points for exercise in EXERCISES.values())
    assert rows["complete"]["total"] == str(full), rows["complete"]
    partial = {name for name, exercise in EXERCISES.items() if exercise.lesson in ("02", "06")}
    for name, exercise in EXERCISES.items():
        assert rows["partial"][name] == (str(exercise.points) if name in partial else "0"), name
    for (_, name) in MISTAKES:
        assert rows["mistakes"][name] == "0", name
    others = [name for name in EXERCISES if name not in {n for _, n in MISTAKES}]
    assert all(rows["mistakes"][name] == str(EXERCISES[name].points) for name in others)


def test_every_cheat_scores_zero(graded_class):
    rows, graded, _, _ = graded_class
    cheated = {name for _, name in CHEATS}
    reasons = {row["student"]: row for row in csv.DictReader((root_of(graded_class) / "grades_reasons.csv").open())}
    for name in cheated:
        assert rows["cheater"][name] == "0", (name, rows["cheater"][name])
        why = reasons["cheater"][name]
        assert why in ("failed", "uses npformer") or why.startswith("raised"), (name, why)
    report = {r.exercise: r.report for r in graded[[g.student for g in graded].index("cheater")].results.values()}
    assert "uses npformer" in report["softmax_backward"] and "uses npformer" in report["attention_backward"]
    assert "files cannot be opened" in report["layernorm_backward"] or "KeyError" in report["layernorm_backward"]
    assert "while your function is graded" in report["linear_backward"]
    # the rest of the cheater's work is the instructor's solutions: graded as such
    untouched = [name for name in EXERCISES if name not in cheated]
    assert all(rows["cheater"][name] == str(EXERCISES[name].points) for name in untouched)


def root_of(graded_class):
    return graded_class[2]


def test_the_secret_never_reaches_the_feedback_and_hidden_cases_are_graded(graded_class):
    _, graded, root, secret = graded_class
    feedback = "".join(path.read_text() for path in (root / "grades_feedback").glob("*.txt"))
    assert secret not in feedback and secret not in (root / "grades.csv").read_text()
    assert secret not in (root / "grades_reasons.csv").read_text()
    assert f"{HIDDEN_CASES} hidden cases of your instructor's" in feedback
    mistakes = next(g for g in graded if g.student == "mistakes").results["layernorm_backward"].report
    assert "hidden 1" in mistakes


def test_hidden_cases_are_separable_and_depend_on_the_secret():
    for name, exercise in EXERCISES.items():
        cases = hidden_cases(exercise, "one secret")
        assert len(cases) == HIDDEN_CASES, name
        assert all(separable(case.inputs, exercise.one_token) for case in cases), name
    first, second = (hidden_cases(EXERCISES["layernorm_backward"], secret)[0] for secret in ("one secret", "another"))
    assert first.inputs["x"].shape != second.inputs["x"].shape or not np.array_equal(first.inputs["x"], second.inputs["x"])


def test_separable_refuses_a_length_one_axis_and_equal_axes():
    assert separable({"x": np.zeros((2, 3, 4)), "W": np.zeros((4, 4))})
    assert not separable({"x": np.zeros((2, 1, 4))})
    assert not separable({"x": np.zeros((2, 3, 3))})
    assert separable({"q": np.zeros((2, 3, 1, 4))}, one_token=("q",))


@pytest.mark.parametrize("body, words", [
    ("import subprocess; subprocess.run(['python', '-c', 'import npformer'])", "while your function is graded"),
    ("import os; os.posix_spawn('/bin/true', ['true'], {})", "os.posix_spawn is not allowed"),
    ("import os; os.listdir('/')", "os.listdir is not allowed"),
    ("import gc\n    [setattr(f, '__code__', (lambda e, a: None).__code__) for f in gc.get_objects() "
     "if getattr(f, '__name__', '') == 'guard']", "code cannot be replaced"),
    ("import os; os.system('true')", "os.system is not allowed"),
    ("import ctypes; ctypes.CDLL(None)", "ctypes"),
    ("open('/etc/hostname').read()", "files cannot be opened"),
    ("import os; os.kill(os.getppid(), 9)", "os.kill is not allowed"),
    ("open('written.txt', 'w').write('x')", "files cannot be opened"),
    ("import sys; sys.modules.pop('numpy'); import npformer", "uses npformer"),
])
def test_the_worker_refuses_what_would_reach_the_answer(body, words):
    namespace = {}
    exec(f"def relu_backward(x, dout):\n    {body}\n    return dout * (x > 0)\n", namespace)
    report = check("relu_backward", namespace["relu_backward"], strict=False)
    assert report.failed and words in str(report), report


def test_a_function_that_takes_too_much_memory_or_time_is_stopped():
    namespace = {}
    exec("def relu_backward(x, dout):\n    return x * 0 + sum([bytearray(2**30) for _ in range(8)], bytearray())\n",
         namespace)
    report = check("relu_backward", namespace["relu_backward"], strict=False)
    assert report.failed and "MemoryError" in str(report), report
    exec("def relu_backward(x, dout):\n    while True:\n        pass\n", namespace)
    report = check("relu_backward", namespace["relu_backward"], strict=False, time_limit=1.5)
    assert report.status.said(report.detail) == "timed out after 1.5 s", report


def test_a_forged_reply_fails_the_exercise_and_the_next_one_is_graded():
    namespace = {}
    exec("def relu_backward(x, dout):\n    import os, struct\n    for fd in range(3, 12):\n        try:\n"
         "            os.write(fd, struct.pack('<Q', 2**60))\n        except OSError:\n            pass\n"
         "    return dout * (x > 0)\n", namespace)
    report = check("relu_backward", namespace["relu_backward"], strict=False)
    assert report.failed and "grading process" in report.verdict, report
    assert check("relu_backward", lambda x, dout: dout * (x > 0)).passed


def _seccomp_available() -> bool:
    """Whether libseccomp builds the job's filter here (the light worker of ``check`` loads it then)."""
    from npformer.course import isolation

    return isolation.filters_unavailable() is None


def test_past_the_audit_hook_the_kernel_still_refuses(tmp_path):
    """A student who overwrites the hook's code through NumPy (``__array_interface__`` at any address:
    the audit hook is no security boundary, PEP 578) still opens no file, starts no process and
    imports no npformer: the descriptor limit and the seccomp filter hold in the kernel."""
    namespace = {}
    exec(textwrap.dedent('''
        def relu_backward(x, dout):
            import os, sys, numpy
            class At:
                def __init__(self, address):
                    self.__array_interface__ = {"data": (address, False), "shape": (1,), "typestr": "<u8",
                                                "version": 3}
            sys.keep = (lambda event, args: None).__code__
            numpy.asarray(At(id(sys.modules["__main__"].guard) + 48))[0] = id(sys.keep)  # the hook disarmed
            attempts = [lambda: open(PATH).read(), lambda: __import__("npformer"), lambda: os.pipe()]
            if SECCOMP:  # where the kernel takes the filter: no process either
                attempts.append(lambda: os.posix_spawn("/bin/true", ["true"], {}))
            for attempt in attempts:
                try:
                    attempt()
                    return dout * 0  # something got through: a wrong answer, so the test sees it
                except OSError:
                    pass
            return dout * (x > 0)
    ''').replace("PATH", repr(str(OPS_SOURCE / "relu.py")))
         .replace("SECCOMP", str(_seccomp_available())), namespace)
    report = check("relu_backward", namespace["relu_backward"], strict=False)
    assert report.passed, report


def test_a_forged_end_message_fails_only_its_own_exercise():
    namespace = {}
    exec("def relu_backward(x, dout):\n    import os, struct, json\n"
         "    payload = json.dumps({'end': 'exited', 'code': 0}).encode()\n    for fd in range(3, 12):\n"
         "        try:\n            os.write(fd, struct.pack('<Q', len(payload)) + payload)\n"
         "        except OSError:\n            pass\n    return dout * (x > 0)\n", namespace)
    report = check("relu_backward", namespace["relu_backward"], strict=False)
    assert report.failed and "grading process" in report.verdict, report
    assert check("relu_backward", lambda x, dout: dout * (x > 0)).passed
