"""``npformer course ACTION``: both editions, executed notebooks, the exercise table, collecting a
student's functions and grading a class."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..tasks.checks import check_folder_can_be_created
from .arguments import number, require
from .inputs import writable_files

ACTIONS = ("student", "instructor", "notebooks", "exercises", "collect", "grade", "secret")
WRITES = {"collect": "my_npformer.py", "grade": "grades.csv"}  # what --out names by default


def _written_file(args: argparse.Namespace) -> str:
    """The file that ``collect`` or ``grade`` writes: ``--out``, else its default."""
    return args.module or WRITES[args.action]


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "course", help="the course: both editions, notebooks, the exercise table, collecting and grading",
        description="student OUT: the lessons without the solutions (each a stub that raises "
                    "NotImplementedError), the classic-mistake cells and the answers. instructor OUT: the lessons "
                    "with all of them. notebooks OUT: the lessons as executed Jupyter notebooks (needs the course "
                    "extra). exercises: the table of graded exercises and open questions. collect FOLDER --out "
                    "FILE: your graded functions, from your lessons, in one module for npformer train --ops FILE. "
                    "grade SUBMISSIONS --out grades.csv: every student folder of SUBMISSIONS graded in fresh "
                    "processes, one CSV row per student, feedback files beside the CSV (--secret FILE adds your "
                    "hidden cases). secret FILE: write a new instructor's secret. The lessons come with "
                    "the installed package (--lessons to use other ones).")
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("out", nargs="?", help="output folder (student, instructor, notebooks); for "
                                               "collect, the folder of your filled-in lessons (.py or "
                                               ".ipynb); for grade, the folder of submissions")
    parser.add_argument("--out", dest="module", default=None,
                        help="collect: the module to write (default: my_npformer.py); grade: the CSV "
                             "(default: grades.csv)")
    parser.add_argument("--lessons", default=None, help="a lessons folder (default: the lessons installed with npformer)")
    parser.add_argument("--notebooks", action="store_true",
                        help="student, instructor: write .ipynb notebooks (not executed) instead of .py "
                             "scripts; the student's carry nbgrader's cell metadata")
    parser.add_argument("--student", action="store_true", help="notebooks: of the student edition")
    parser.add_argument("--lesson", action="append", type=number("lesson", int), metavar="NN",
                        help="notebooks: only this lesson (repeat for several; default: all)")
    parser.add_argument("--no-execute", action="store_true", help="notebooks: convert without running")
    parser.add_argument("--quick", action="store_true",
                        help="notebooks: short trainings (NPFORMER_QUICK=1), as the tests run them")
    parser.add_argument("--timeout", type=number("timeout", float), default=30.0,
                        help="grade: seconds one exercise may run (default: %(default)s)")
    parser.add_argument("--seed", type=number("seed", int), default=None,
                        help="grade: the seed of the unseen cases, the same for the whole class "
                             "(default: drawn once, written in the feedback)")
    parser.add_argument("--secret", default=None, metavar="FILE",
                        help="grade: the instructor's secret (a file outside the submissions, written by "
                             "npformer course secret FILE): adds hidden cases to every exercise, never shown "
                             "in feedback")
    parser.set_defaults(handler=run)


def _check_paths(args: argparse.Namespace) -> None:
    """Every folder read exists and every file or folder written can be, before any work (a
    ``--lessons`` folder is checked by the course itself, which says what it looked for)."""
    if args.action == "secret":
        require(bool(args.out), "needs the file to write: npformer course secret FILE")
        writable_files(args.out)
    elif args.action in ("collect", "grade"):
        what = "the folder of your lessons" if args.action == "collect" else "the folder of submissions (one per student)"
        require(bool(args.out), f"needs {what}: npformer course {args.action} FOLDER --out FILE")
        writable_files(_written_file(args))
    elif args.action != "exercises":
        require(bool(args.out), f"needs an output folder: npformer course {args.action} OUT")
        check_folder_can_be_created(args.out)


def run(args: argparse.Namespace) -> int:
    from .. import course

    _check_paths(args)
    try:
        if args.action == "collect":
            print(course.collect(args.out, _written_file(args)).summary())
        elif args.action == "secret":
            print(course.grading.write_secret(args.out))
        elif args.action == "grade":
            secret = course.grading.read_secret(args.secret, args.out) if args.secret else None
            graded = course.grade_class(args.out, _written_file(args), timeout=args.timeout, seed=args.seed,
                                        secret=secret,
                                        progress=lambda name: print(f"grading {name} ...", flush=True))
            print(course.grading.summary(graded))
            print(f"wrote {_written_file(args)} and the feedback beside it")
        elif args.action == "exercises":
            print(course.exercise_table(args.lessons))
        elif args.action in ("student", "instructor"):
            student = args.action == "student"
            if args.notebooks:
                files = course.lesson_notebooks(args.lessons, args.out, execute=False, student=student)
            else:
                files = (course.student_edition if student else course.instructor_edition)(args.lessons, args.out)
            print(f"wrote the {args.action} edition of {len(files)} lessons to {args.out}")
        else:
            only = [f"{int(number):02d}" for number in args.lesson] if args.lesson else None
            files = course.lesson_notebooks(args.lessons, args.out, execute=not args.no_execute,
                                            student=args.student, quick=args.quick, only=only)
            print(f"wrote {len(files)} {'executed ' if not args.no_execute else ''}notebook"
                  f"{'s' if len(files) != 1 else ''} to {args.out}")
    except (FileNotFoundError, FileExistsError, ValueError, ImportError, course.notebooks.NotebookError) as error:
        raise UsageError(str(error)) from None
    return 0
