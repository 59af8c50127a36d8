"""The course around the lessons: graded exercises, the student edition, notebooks.

    exercises.py  EXERCISES: what a student writes (natural signatures, never npformer's caches),
                  the reference, the cases that exercise its edges
    grader.py     check(name, student_fn): against the reference and finite differences,
                  a table per tensor, hints, "not implemented yet" for a stub
    edition.py    student_edition: the lessons with every solution replaced by a stub;
                  exercise_table: the lessons' graded exercises and open questions
    notebooks.py  lesson_notebooks: the lessons as Jupyter notebooks, executed or not (extra "course")
    collect.py    collect: a student's graded functions from their lessons into one module
    student_ops.py  student_ops: those functions as an op set for ops.using (train, gradcheck)

Example, in a lesson::

    from npformer.course import check

    def layernorm_backward(x, gamma, beta, dout):
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

    print(check("layernorm_backward", layernorm_backward))
"""

from .collect import collect
from .edition import BEGIN, END, exercise_table, student_edition, student_source
from .exercises import EXERCISES, Case, Exercise
from .grader import ExerciseFailed, ExerciseReport, check
from .notebooks import lesson_notebooks
from .student_ops import StudentOps, StudentOpsError, load_student_ops, student_ops

__all__ = ["check", "EXERCISES", "Exercise", "Case", "ExerciseReport", "ExerciseFailed",
           "student_edition", "student_source", "exercise_table", "lesson_notebooks", "BEGIN", "END",
           "collect", "student_ops", "load_student_ops", "StudentOps", "StudentOpsError"]
