"""The course around the lessons: graded exercises, the student edition, notebooks.

    exercises.py  EXERCISES: what a student writes (natural signatures, never npformer's caches),
                  the reference, the cases that exercise its edges
    grader.py     check(name, student_fn): against the reference and finite differences,
                  a table per tensor, hints, "not implemented yet" for a stub
    edition.py    student_edition: the lessons with every solution replaced by a stub;
                  exercise_table: the lessons' graded exercises and open questions
    notebooks.py  lesson_notebooks: the lessons as Jupyter notebooks, executed or not (extra "course")

Example, in a lesson::

    from npformer.course import check

    def layernorm_backward(x, gamma, beta, dout):
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

    print(check("layernorm_backward", layernorm_backward))
"""

from .edition import BEGIN, END, exercise_table, student_edition, student_source
from .exercises import EXERCISES, Case, Exercise
from .grader import ExerciseFailed, ExerciseReport, check
from .notebooks import lesson_notebooks

__all__ = ["check", "EXERCISES", "Exercise", "Case", "ExerciseReport", "ExerciseFailed",
           "student_edition", "student_source", "exercise_table", "lesson_notebooks", "BEGIN", "END"]
