"""The final project: its handout, and the part of its grade that a machine can give.

``npformer course project OUT`` writes the handout: ``PROJECT.md`` (``PROJECT_TEXT``: what to do,
the deliverables, the milestones and the rubric; ``docs/instructor.md`` quotes it) and
``component.py``, the template of the component. ``npformer course
project-check SUBMISSION`` grades what can be checked without reading the report:

* **the component's backward pass** (``component.py``: ``forward``, ``backward`` and ``SHAPES``):
  random float64 inputs of the declared shapes, the student's ``backward`` against central
  differences of the student's ``forward``, computed here from outputs the grading worker sends
  back (the student's code runs only there, as in ``course grade``), each input's gradient a row;
* **the translator's score** (``run/``, a folder written by ``npformer train``): its BLEU, beam 4,
  on the instructor's held-out pairs (``--data``; else the run's own test split, which the student
  could have changed, and the report says so), against a threshold.

Each passing part earns ``AUTOMATIC_POINTS`` of it; the rubric (``docs/instructor.md``) gives the
other ``100 - sum(AUTOMATIC_POINTS.values())``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import numpy

from ..gradcheck.report import DEFAULT_TOL, judge
from .worker import Worker
from .wire import Status

COMPONENT_FILE = "component.py"
RUN_FOLDER = "run"
AUTOMATIC_POINTS = {"backward": 20, "bleu": 10}   # of 100; the rubric gives the rest
BLEU_THRESHOLD = 15.0     # beam 4, on held-out pairs of the student's language pair
MAX_ENTRIES = 4096        # inputs larger than this make the finite differences too slow: refused
STEP = 1e-6               # central differences in float64

PROJECT_TEXT = """# The final project: your component, on a language pair of your choice

Weeks 12 to 14, beside the last lessons (or into the exam period, if your term has one). Alone or
in pairs. Everything runs on a laptop CPU.

## What you do

1. **A new language pair.** Pick a Tatoeba pair other than English-French
   (`npformer data tatoeba --pair deu-eng`, `spa-eng`, `ita-eng`, ...: the files of manythings.org/anki)
   and train npformer's translator on it (`npformer train --data data/deu-eng/deu.txt --name baseline`).
   Leave out of training the held-out pairs your instructor gives you: they score your translator.
2. **A component with a hand-written backward pass.** Write one op the Transformer can use instead of
   npformer's, its forward and its backward pass, in NumPy, one that no lesson grades: squared ReLU
   in place of ReLU, a scaled or a gated residual, a learned scale on the attention scores, ...
   (RMSNorm, SiLU and SwiGLU are lesson 28's exercises: take one only with a question of your own,
   such as RMSNorm in the translator in place of layer norm). Put the forward and backward
   pass in `component.py` (the template's interface: `forward`, `backward`, `SHAPES`) and check it
   with `npformer course project-check .` until its backward pass passes.
3. **Does it help?** Make it the op the model runs, in Python, with two small wrappers that give your
   functions npformer's op form (`out, cache = op_forward(...)`, `grads = op_backward(dout, cache)`;
   lesson 27 and `docs/architecture.md` show op sets). For RMSNorm in place of layer norm:

   ```python
   def rms_forward(x, gamma, beta):
       return forward(x, gamma) + beta, (x, gamma)
   def rms_backward(dout, cache):
       dx, dgamma = backward(dout, *cache)
       return dx, dgamma, dout.reshape(-1, dout.shape[-1]).sum(axis=0)
   with ops.using({"layernorm_forward": rms_forward, "layernorm_backward": rms_backward}, name="rmsnorm"):
       ...   # the training, as lesson 13 runs it
   ```

   Train on the same pair with the same budget, three seeds or more for each model, and compare
   with the baseline.

## What you hand in (one folder)

* `component.py`: the component (graded automatically: its backward pass against finite differences);
* `run/`: your best translator's run folder, `runs/NAME/` as `npformer train --name NAME` wrote it,
  copied (graded automatically: its BLEU, beam 4, on your instructor's held-out pairs of your language
  pair, against the threshold your instructor sets);
* `report.md` (4 pages at most): the component's equations and the derivation of its backward pass,
  the gradient check's table, the training curves of both models, BLEU with its spread over the
  seeds, three translations each model gets wrong, and what you conclude.

## Milestones

| week | milestone |
|---|---|
| 12 | proposal: the language pair, the component, the question, one paragraph |
| 13 | checkpoint: `component.py` passes `npformer course project-check`; the baseline is trained |
| 14 | the folder above |

## Rubric (100 points)

| part | points | full marks when |
|---|---:|---|
| backward pass (automatic) | 20 | `project-check`'s gradient check passes |
| translator (automatic) | 10 | BLEU (beam 4) on the held-out pairs at or above the threshold your instructor sets |
| derivation | 20 | every step of the backward pass follows from the forward pass, shapes stated |
| experiment | 20 | same budget and data for both models, three seeds or more, the spread reported |
| analysis | 20 | the conclusion follows from the numbers; the errors are read, not only counted |
| writing | 10 | a reader can rerun everything from the report's commands |
"""

COMPONENT_TEMPLATE = '''"""Your component for the final project: a forward pass, its backward pass, and the shapes to
check it on. NumPy only (the grader runs this file where npformer cannot be imported).

Example: RMSNorm, y = x / sqrt(mean(x ** 2, last axis) + eps) * gain.
"""

import numpy as np

# The inputs, by name and shape, in the order forward takes them: the check draws random float64
# arrays of these shapes (keep them small: at most 4096 numbers in all).
SHAPES = {"x": (2, 5, 8), "gain": (8,)}


def forward(x, gain):
    """x: (B, T, D), gain: (D,) -> y: (B, T, D)."""
    raise NotImplementedError


def backward(dout, x, gain):
    """The gradient of sum(dout * forward(x, gain)) with respect to each input, in the order of
    SHAPES: returns (dx, dgain)."""
    raise NotImplementedError
'''


@dataclass
class ProjectCheck:
    """What ``check_project`` found: each part's points, and the text to hand back."""

    points: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.points.values())

    def __str__(self) -> str:
        parts = ", ".join(f"{part} {self.points.get(part, 0)}/{most}" for part, most in AUTOMATIC_POINTS.items())
        return "\n".join(self.lines + [f"automatic part: {self.total} of {sum(AUTOMATIC_POINTS.values())} points "
                                       f"({parts}); the rubric gives the other "
                                       f"{100 - sum(AUTOMATIC_POINTS.values())}"])


def declared_shapes(source: str) -> dict[str, tuple[int, ...]]:
    """``SHAPES`` of a component's source, read without running it; a ValueError says what is wrong."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SHAPES" for t in node.targets):
            try:
                shapes = ast.literal_eval(node.value)
            except ValueError:
                raise ValueError("SHAPES must be a literal: {\"x\": (2, 5, 8), ...}") from None
            if not isinstance(shapes, dict) or not shapes or not all(
                    isinstance(name, str) and isinstance(shape, tuple) and all(isinstance(n, int) and n > 0 for n in shape)
                    for name, shape in shapes.items()):
                raise ValueError("SHAPES must map each input's name to a tuple of positive sizes")
            entries = sum(int(numpy.prod(shape)) for shape in shapes.values())
            if entries > MAX_ENTRIES:
                raise ValueError(f"SHAPES holds {entries} numbers; keep the check's inputs to {MAX_ENTRIES} at most")
            return shapes
    raise ValueError(f"{COMPONENT_FILE} has no SHAPES = {{name: shape}} (the inputs to check it on)")


def _outputs(worker: Worker, source: str, name: str, cases: list[dict], timeout: float) -> list:
    """The student's ``name`` on each case, run in the worker; a RuntimeError says why one failed."""
    result = worker.run(cases, source=source, name=name, filename=f"{COMPONENT_FILE}:{name}", time_limit=timeout)
    if result.end != "exited" and len(result.replies) < len(cases):
        raise RuntimeError(f"{name} {result.end}")
    for reply in result.replies:
        if reply.status is Status.NOT_IMPLEMENTED:
            raise RuntimeError(f"{name} is not implemented yet")
        if reply.status is not Status.RETURNED:
            where = f" (line {reply.line})" if reply.line else ""
            raise RuntimeError(f"{name} {reply.status.on_wire} {reply.error_type}{where}: {reply.message}".strip())
    return [reply.output for reply in result.replies]


def check_component(folder: str | Path, *, seed: int = 0, timeout: float = 120.0,
                    isolated: bool = True) -> tuple[bool, list[str]]:
    """The component's backward pass against central differences of its forward pass; (passed, lines)."""
    path = Path(folder) / COMPONENT_FILE
    if not path.is_file():
        return False, [f"component: no {COMPONENT_FILE} in the submission"]
    source = path.read_text(encoding="utf-8")
    try:
        shapes = declared_shapes(source)
    except (ValueError, SyntaxError) as error:
        return False, [f"component: {error}"]
    rng = numpy.random.default_rng(seed)
    inputs = {name: rng.standard_normal(shape) for name, shape in shapes.items()}
    worker = Worker(isolated=isolated)  # the student's code, isolated by the kernel (course.isolation)
    try:
        [output] = _outputs(worker, source, "forward", [inputs], timeout)
        dout = rng.standard_normal(numpy.shape(output))
        [gradients] = _outputs(worker, source, "backward", [{"dout": dout, **inputs}], timeout)
        gradients = gradients if isinstance(gradients, (tuple, list)) else (gradients,)
        if len(gradients) != len(shapes):
            return False, [f"component: backward returned {len(gradients)} gradients for {len(shapes)} inputs "
                           f"({', '.join(shapes)})"]
        perturbed = []   # x + h and x - h for every entry of every input, in that order
        for name in shapes:
            for index in numpy.ndindex(shapes[name]):
                for sign in (1.0, -1.0):
                    moved = {key: value.copy() for key, value in inputs.items()}
                    moved[name][index] += sign * STEP
                    perturbed.append(moved)
        outputs = _outputs(worker, source, "forward", perturbed, timeout)
    except RuntimeError as error:
        return False, [f"component: {error}"]
    finally:
        worker.close()
    pairs, position = [], 0
    for (name, shape), analytic in zip(shapes.items(), gradients):
        numeric = numpy.empty(shape)
        for index in numpy.ndindex(shape):
            plus, minus = outputs[position], outputs[position + 1]
            numeric[index] = numpy.sum(dout * (plus - minus)) / (2 * STEP)
            position += 2
        if numpy.shape(analytic) != shape:
            return False, [f"component: the gradient of {name} has shape {numpy.shape(analytic)}, not {shape}"]
        pairs.append((name, shape, numpy.asarray(analytic, dtype=numpy.float64), numeric, ""))
    report = judge("component", pairs, DEFAULT_TOL)
    return report.passed, ["component: backward against central differences of forward (float64, seed "
                           f"{seed})", *("  " + line for line in str(report).splitlines())]


def check_translator(folder: str | Path, *, data: str | None = None, threshold: float = BLEU_THRESHOLD,
                     max_sentences: int | None = 500) -> tuple[bool, list[str]]:
    """The submitted run's BLEU (beam 4) on ``data`` (the instructor's held-out pairs), else on the run's
    own test split; (at or above ``threshold``, lines)."""
    from ..data import load_pairs
    from ..data.files import DataError
    from ..tasks.translation import RunFolder, Translator, load_run, test_bleu

    run = Path(folder) / RUN_FOLDER
    if not run.is_dir():
        return False, [f"translator: no {RUN_FOLDER}/ folder in the submission (copy your best run, runs/NAME as "
                       "npformer train --name NAME wrote it, to run/)"]
    try:
        folder_ = RunFolder(str(run))
        if data is not None:
            pairs, _ = load_pairs(data, max_words=None)
            where = data
        else:
            pairs = folder_.split("test")
            where = f"the run's own test split ({RUN_FOLDER}/test.tsv, written by the student: pass --data to use yours)"
        pairs = pairs[:max_sentences] if max_sentences else pairs
        record = test_bleu(Translator.from_run(load_run(str(run))), pairs, 4, progress=False)
    except (DataError, FileNotFoundError, ValueError, KeyError) as error:
        return False, [f"translator: the run could not be evaluated: {error}"]
    bleu = record["bleu_beam"]
    passed = bleu >= threshold
    return passed, [f"translator: BLEU {bleu:.1f} (beam 4) on {len(pairs):,} pairs of {where}: "
                    f"{'at or above' if passed else 'below'} the threshold {threshold:g}"]


def check_project(folder: str | Path, *, data: str | None = None, threshold: float = BLEU_THRESHOLD,
                  seed: int = 0, isolated: bool = True) -> ProjectCheck:
    """Both automatic checks of one submission; ``isolated=False`` runs the component's code
    without the kernel's isolation (``course.isolation``)."""
    check = ProjectCheck()
    passed, lines = check_component(folder, seed=seed, isolated=isolated)
    check.points["backward"] = AUTOMATIC_POINTS["backward"] if passed else 0
    check.lines += lines
    passed, lines = check_translator(folder, data=data, threshold=threshold)
    check.points["bleu"] = AUTOMATIC_POINTS["bleu"] if passed else 0
    check.lines += lines
    return check


def write_handout(out: str | Path) -> list[Path]:
    """Write the project's handout into ``out``: ``PROJECT.md`` and the component's template."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "PROJECT.md").write_text(PROJECT_TEXT, encoding="utf-8")
    (out / COMPONENT_FILE).write_text(COMPONENT_TEMPLATE, encoding="utf-8")
    return [out / "PROJECT.md", out / COMPONENT_FILE]
