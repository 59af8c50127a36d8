"""The course around the lessons: graded exercises, the two editions, notebooks, grading a class.

    exercises.py   EXERCISES: what a student writes (natural signatures, never npformer's caches),
                   the reference, the public cases and the unseen ones, npformer's own answer
    grader.py      check(name, student_fn): against the reference and finite differences, with
                   npformer's own answer unavailable; a table per tensor, hints, "not implemented yet"
    hints.py       the classic mistakes, each recognised from the student's output
    wrong_solutions.py  realistic wrong solutions to every exercise: the grader must fail them all
    edition.py     the student and instructor editions, where the lessons are installed, the table
    notebooks.py   lesson_notebooks: the lessons as Jupyter notebooks, the student's with nbgrader
                   metadata (extra "course")
    collect.py     collect: a student's graded functions from their lessons into one module
    student_ops.py student_ops: those functions as an op set for ops.using (train, gradcheck)
    grading.py     grade_class: a folder of submissions -> one CSV row per student, and feedback

Example, in a lesson::

    from npformer.course import check

    def layernorm_backward(x, gamma, beta, dout):
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

    print(check("layernorm_backward", layernorm_backward))
"""

from . import grading
from .collect import collect
from .edition import (BEGIN, END, exercise_table, instructor_edition, instructor_only, lessons_folder,
                      student_edition, student_source)
from .exercises import EXERCISES, Case, Exercise
from .grader import ExerciseFailed, ExerciseReport, check
from .grading import grade_class
from .notebooks import lesson_notebooks
from .student_ops import StudentOps, StudentOpsError, load_student_ops, student_ops

__all__ = ["check", "EXERCISES", "Exercise", "Case", "ExerciseReport", "ExerciseFailed",
           "student_edition", "instructor_edition", "student_source", "instructor_only", "lessons_folder",
           "exercise_table", "lesson_notebooks", "BEGIN", "END", "collect", "student_ops", "load_student_ops",
           "StudentOps", "StudentOpsError", "grade_class", "grading"]
