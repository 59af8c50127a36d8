"""The course around the lessons: graded exercises, the two editions, notebooks, grading a class.

    exercises.py   EXERCISES: what a student writes (natural signatures, never npformer's caches),
                   the reference, the public cases and the unseen ones, the derivations' steps
    cases.py       the public, unseen and hidden cases; their references, computed in the grader
    grader.py      check(name, student_fn): run in the worker, compared here with the reference and
                   finite differences; a table per tensor, hints, the first wrong step of a derivation
    worker.py      the grader's side of the grading worker: start it, send a job, read the replies
    sandbox.py     the grading worker itself (run as a script, never importing npformer): a child
                   per exercise behind an audit hook, with time and memory limits
    difficulty.py  each exercise's steps, answer length and estimated minutes
    hints.py       the classic mistakes, each recognised from the student's output
    wrong_solutions.py  realistic wrong solutions to every exercise: the grader must fail them all
    edition.py     the student and instructor editions (the wheel ships the student's), the table
    notebooks.py   lesson_notebooks: the lessons as Jupyter notebooks, the student's with nbgrader
                   metadata (extra "course")
    collect.py     collect: a student's graded functions from their lessons into one module
    student_ops.py student_ops: those functions as an op set for ops.using (train, gradcheck)
    grading.py     grade_class: a folder of submissions -> one CSV row of numbers per student, and
                   feedback; the instructor's secret and its hidden cases; autograde: one submission
    syllabus.py    the term: fourteen weeks, their lessons and goals, the problem sets, the hours
    gradescope.py  the Gradescope autograder of a problem set and its results.json
    classroom.py   the GitHub Classroom template of a problem set and the result its workflow reports
    nbgrader_course.py  nbgrader's course folder: one assignment per week, the settings it needs
    project.py     the final project's handout and its automatic checks
    variants/      each student's own variant of every graded derivation: statements and forwards; the
                   grader's answers are finite differences of a variant's forward
    roster.py      the instructor's roster, and whose variants are whose
    variant_file.py  a student's variants file: written per student, read by check and the lessons

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
from .variant_file import show_variants

__all__ = ["check", "EXERCISES", "Exercise", "Case", "ExerciseReport", "ExerciseFailed",
           "student_edition", "instructor_edition", "student_source", "instructor_only", "lessons_folder",
           "exercise_table", "lesson_notebooks", "BEGIN", "END", "collect", "student_ops", "load_student_ops",
           "StudentOps", "StudentOpsError", "grade_class", "grading", "show_variants"]
