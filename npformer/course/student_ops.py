"""The student's graded functions as an op set: ``ops.using(course.student_ops(my_module))``.

A student writes each exercise with its natural signature (``linear_backward(x, W, b, dout)``,
``layernorm_backward(x, gamma, beta, dout)``, ...): the inputs of the forward pass and the
upstream gradient, never npformer's caches. The model calls ops with the op signatures
(``linear_backward(dy, cache)``); ``op_adapters`` joins the two, for each exercise the student got
right: a forward op that keeps the inputs in its cache and a backward op that hands them and the
upstream gradient to the student's function.

Each function is graded first (``course.check``, on the public cases, against the student's variant
when they have a variants file): what is missing, raises, or fails keeps npformer's op (the set
active before), and ``StudentOps.report()`` says which is which. A variant's forward op runs the
variant (``student_variants``), so that the student's backward is the gradient of what the model
computes. ``allow_failing=True`` uses a failing function anyway (a lesson that shows what a wrong
gradient does to training).

The student's training loop (lesson 13's ``train_loop``) is not an op: graded the same way, it is
``StudentOps.train_loop`` (None when missing or failing), which ``npformer train --ops`` hands to
the trainer to take the steps (``tasks.translation.student_loop``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from .. import ops
from .exercises import EXERCISES
from .grader import check
from .wire import Status
from .op_adapters import ops_from
from .student_variants import FORWARDS, NOT_IN_THE_MODEL, with_variants
from .variant_file import find_file, my_variant
from .variants import TEXTBOOK_FORM

__all__ = ["StudentOps", "student_ops", "load_student_ops", "EXERCISE_OPS", "StudentOpsError", "TRAINING_LOOP"]


class StudentOpsError(ValueError):
    """A student's module cannot serve as an op set (no graded function, a wrong signature)."""


# exercise -> the op names it provides (for the report)
EXERCISE_OPS: dict[str, tuple[str, ...]] = {
    "linear_backward": ("linear_forward", "linear_backward"),
    "relu_backward": ("relu_forward", "relu_backward"),
    "gelu_backward": ("gelu_forward", "gelu_backward"),
    "layernorm_backward": ("layernorm_forward", "layernorm_backward"),
    "embedding_backward": ("embedding_forward", "embedding_backward"),
    "dropout_backward": ("dropout_forward", "dropout_backward"),
    "attention": ("attention_forward",),
    "attention_backward": ("attention_forward", "attention_backward"),
    "cross_entropy_backward": ("cross_entropy_forward", "cross_entropy_backward"),
    "smoothed_cross_entropy_backward": ("cross_entropy_forward", "cross_entropy_backward"),
    "padding_mask": ("padding_mask",),
    "causal_mask": ("causal_mask",),
    "positional_encoding": ("positional_encoding",),
    "multi_head_attention_backward": ("multi_head_attention_backward",),
    "residual_backward": ("residual_backward",),
    "residual_backward_with_memory": ("residual_backward_with_memory",),
    "stack_backward_with_memory": ("stack_backward_with_memory",),
    "encoder_layer_backward": ("encoder_layer_backward",),
    "decoder_backward": ("decoder_backward",),
    "transformer_backward": ("transformer_backward",),
    "adam_step": ("adam_step",),
    "rmsnorm_backward": ("rmsnorm_forward", "rmsnorm_backward"),
    "rope_backward": ("rope_forward", "rope_backward"),
    "swiglu_backward": ("swiglu_forward", "swiglu_backward"),
    "repeat_kv_backward": ("grouped_query_attention_backward",),
}

TRAINING_LOOP = "train_loop"  # the exercise whose function takes npformer train's steps, not an op


@dataclass
class ExerciseStatus:
    """One exercise of the op set: whether the student's function is used ("passed", or "failing"
    when allowed), and why."""

    name: str
    lesson: str
    status: str          # "passed", "failing" (used only with allow_failing), "failed", "missing", "not implemented"
    message: str = ""


_KEEPS_INPUTS = "textbook, keeping the inputs for your backward"


class StudentOps(dict):
    """``{op name: function}`` built from a student's functions; ``ops.using`` labels them "yours".

    ``exercises`` has one ``ExerciseStatus`` per exercise that could feed an op; ``report()``
    prints them with the ops they give, and ``loop_exercise``, the training loop's (``train_loop``:
    the function, when it is used).
    """

    name = "yours"

    def __init__(self, functions: dict[str, Callable], exercises: list[ExerciseStatus], source: str,
                 variants: dict[str, str] | None = None, train_loop: Callable | None = None,
                 loop_exercise: ExerciseStatus | None = None) -> None:
        super().__init__(functions)
        self.exercises = exercises  # the exercises that give ops
        self.train_loop = train_loop  # the student's training loop, used (it passed, or failing is allowed), or None
        self.loop_exercise = loop_exercise  # its status (None: not looked for)
        self.source = source
        self.variants = variants or {}  # exercise -> the student's variant, whose forward the op set runs
        # A forward op made only to keep the inputs for the student's backward computes npformer's
        # forward: ``ops.active()`` says so, rather than crediting it to the student.
        yours_forward = {"attention_forward"} if any(e.name == "attention" and e.status in ("passed", "failing")
                                                     for e in exercises) else set()
        self.labels = {op: self.name if not op.endswith("_forward") or op in yours_forward else _KEEPS_INPUTS
                       for op in functions}
        for op, exercise, _ in FORWARDS:
            if op in self.labels and exercise in self.variants:
                self.labels[op] = f"your variant's forward ('{self.variants[exercise]}')"

    def yours(self) -> list[str]:
        """The ops whose computation is the student's (not a forward that only keeps the inputs)."""
        return sorted(op for op, label in self.labels.items() if label == self.name)

    def report(self) -> str:
        """Which ops are the student's and which are npformer's, exercise by exercise."""
        owned = self.yours()
        lines = [f"{len(owned)} of {len(ops.OP_NAMES)} ops are yours (from {self.source}); "
                 f"the others are npformer's ({ops.DEFAULT} set; {len(self) - len(owned)} of them npformer's "
                 "forward keeping the inputs for your backward)"]
        if self.loop_exercise is not None:
            lines[0] += "; the training loop is " + ("yours" if self.train_loop is not None else "npformer's")
        for entry in self.exercises + ([self.loop_exercise] if self.loop_exercise is not None else []):
            gives = ", ".join(EXERCISE_OPS.get(entry.name, ("the training loop (npformer train's steps)",)))
            verdict = {"passed": "yours", "failing": "yours, FAILING its exercise (allowed)"}.get(
                entry.status, f"npformer's ({entry.status}{': ' + entry.message if entry.message else ''})")
            if entry.name in self.variants and entry.status in ("passed", "failing"):
                verdict += f", variant '{self.variants[entry.name]}' (its forward runs in the model)"
            walk = next((walk for walk, rules in WALKS.items() if entry.name in rules and walk in owned), None)
            if walk is not None and entry.status in ("passed", "failing"):
                verdict += f" (not run: your {walk} takes its place)"
            lines.append(f"  lesson {entry.lesson}  {entry.name:32s} -> {gives}: {verdict}")
        return "\n".join(lines)


# a student's function that runs a block (or walks a layer's, a decoder's blocks), and the exercises whose
# functions it takes the place of there
WALKS = {"multi_head_attention_backward": ("attention_backward",),
         "encoder_layer_backward": ("residual_backward",),
         "decoder_backward": ("residual_backward", "residual_backward_with_memory", "stack_backward_with_memory")}


def _parameters(exercise_name: str) -> list[str]:
    """The parameter names of an exercise's natural signature, from its reference."""
    return list(inspect.signature(EXERCISES[exercise_name].reference).parameters)


def _check_signature(source: str, name: str, function: Callable) -> None:
    expected = _parameters(name)
    try:
        inspect.signature(function).bind(*expected)
    except TypeError:
        raise StudentOpsError(f"{source}: {name} must take ({', '.join(expected)}), got "
                              f"{name}{inspect.signature(function)}") from None
    except ValueError:  # a builtin without a signature: let the grader judge it
        pass


def _collect(module: Any) -> dict[str, Callable]:
    names = (*EXERCISE_OPS, TRAINING_LOOP)
    if isinstance(module, dict):
        return {name: value for name, value in module.items() if name in names and callable(value)}
    return {name: getattr(module, name) for name in names if callable(getattr(module, name, None))}


def student_ops(module: Any, *, allow_failing: bool = False, source: str | None = None) -> StudentOps:
    """The op set made of ``module``'s graded functions (a module, an object or a dict).

    Every function is graded first; one that fails keeps npformer's op unless ``allow_failing``.
    Raises ``StudentOpsError`` when ``module`` defines none of the exercises' names, or a
    function whose parameters do not fit its exercise's signature.
    """
    source = source or getattr(module, "__file__", None) or getattr(module, "__name__", "the module")
    found = _collect(module)
    if not found:
        raise StudentOpsError(f"{source}: defines none of the graded functions that make ops "
                              f"({', '.join(EXERCISE_OPS)}), nor {TRAINING_LOOP}")
    for name, function in found.items():
        _check_signature(source, name, function)
    exercises, usable, variants = [], {}, {}
    for name in sorted(EXERCISE_OPS, key=lambda name: EXERCISES[name].lesson):
        status = _graded(name, found, allow_failing)
        exercises.append(status)
        if status.status in ("passed", "failing"):
            usable[name] = found[name]
            if my_variant(name) != TEXTBOOK_FORM:
                variants[name] = my_variant(name)
    _projections_as_lesson_08(exercises, usable, variants)
    loop = _graded(TRAINING_LOOP, found, allow_failing)
    return StudentOps(with_variants(ops_from(usable), variants), exercises, str(source), variants,
                      found[TRAINING_LOOP] if loop.status in ("passed", "failing") else None, loop)


def _projections_as_lesson_08(exercises: list[ExerciseStatus], usable: dict, variants: dict) -> None:
    """Lesson 08's backward runs the attention block only where the model computes what it derived: the
    projections ``x W + b`` (no linear variant in the set) and the heads' attention of its variant (drawn
    with lesson 07's: the model runs it only with the student's ``attention_backward``)."""
    name = "multi_head_attention_backward"
    if name not in usable:
        return
    why = ""
    if "linear_backward" in variants:
        why = (f"your linear variant '{variants['linear_backward']}' changes the block's projections, "
               "which this backward takes as x W")
    elif name in variants and variants.get("attention_backward") != variants[name]:
        why = (f"your variant '{variants[name]}' runs in the heads only with your attention_backward, "
               "which the op set does not use")
    if why:
        del usable[name]
        variants.pop(name, None)
        index = next(index for index, entry in enumerate(exercises) if entry.name == name)
        exercises[index] = ExerciseStatus(name, exercises[index].lesson, "not run", why)


def _graded(name: str, found: dict[str, Callable], allow_failing: bool) -> ExerciseStatus:
    """Exercise ``name``'s status: the student's function graded (against their variant), or why not."""
    lesson = EXERCISES[name].lesson
    if name not in found:
        return ExerciseStatus(name, lesson, "missing")
    variant = my_variant(name)
    if variant != TEXTBOOK_FORM and name in NOT_IN_THE_MODEL:
        return ExerciseStatus(name, lesson, "not run", f"your variant '{variant}' is not what the model's op computes")
    report = check(name, found[name], strict=False, variant=variant)
    if report.passed:
        return ExerciseStatus(name, lesson, "passed")
    if report.status is Status.NOT_IMPLEMENTED:
        return ExerciseStatus(name, lesson, "not implemented")
    return ExerciseStatus(name, lesson, "failing" if allow_failing else "failed", _first_line(report))


def _first_line(report: Any) -> str:
    lines = [line for line in str(report).splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def load_student_ops(path: str, *, allow_failing: bool = False) -> StudentOps:
    """``student_ops`` of the Python file ``path`` (as ``npformer course collect`` writes it).

    Every problem is a one-line ``StudentOpsError`` naming the file (and the function), raised
    before any work: a missing file, a file that is not Python or does not import, no graded
    function, a wrong signature, and (unless ``allow_failing``) a function that fails its exercise.
    """
    import importlib.util
    import pathlib

    file = pathlib.Path(path)
    if not file.is_file():
        raise StudentOpsError(f"{path}: no such file (write it with: npformer course collect LESSONS --out {path})")
    try:
        compile(file.read_bytes(), str(file), "exec")
    except (SyntaxError, ValueError) as error:
        where = f" (line {error.lineno})" if getattr(error, "lineno", None) else ""
        raise StudentOpsError(f"{path}: not Python{where}: {getattr(error, 'msg', error)}") from None
    spec = importlib.util.spec_from_file_location(f"student_ops_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the student's module: any error is theirs, reported in one line
        raise StudentOpsError(f"{path}: importing it raised {type(error).__name__}: {error}") from None
    student = student_ops(module, allow_failing=allow_failing, source=str(path))
    failed = [entry for entry in [*student.exercises, student.loop_exercise] if entry and entry.status == "failed"]
    if failed:
        first = failed[0]
        # graded with variants, a student who runs this away from their variants file is graded on the lessons' forms
        where = "" if find_file() else (" (graded in the lessons' forms: no npformer_variants.json found; if you were "
                                         "given one, run where it is or set NPFORMER_VARIANTS)")
        raise StudentOpsError(
            f"{path}: {first.name} (lesson {first.lesson}) fails its exercise ({first.message}){where}; fix it, "
            f"or pass --allow-failing to use it anyway" + (f" ({len(failed) - 1} more failing)" if len(failed) > 1 else ""))
    return student
