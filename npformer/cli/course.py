"""``npformer course ACTION``: both editions, executed notebooks, the exercise table, collecting a
student's functions and grading a class."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UsageError
from ..tasks.checks import check_folder_can_be_created
from .arguments import number, require
from .inputs import writable_files

ACTIONS = ("student", "instructor", "notebooks", "exercises", "collect", "grade", "secret", "variants", "nbgrader",
           "gradescope", "classroom", "autograde", "project", "project-check")
WRITES = {"collect": "my_npformer.py", "grade": "grades.csv"}  # what --out names by default
FORMATS = ("text", "gradescope", "classroom")  # what autograde writes to --results


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
                    "hidden cases; the sheet holds numbers only, --reasons adds a grid of why). secret FILE: "
                    "write a new instructor's secret. nbgrader OUT: a course folder for nbgrader, one "
                    "assignment per week. gradescope OUT.zip --set N: the Gradescope autograder of problem "
                    "set N. classroom OUT --set N: the GitHub Classroom template repository of problem set N. "
                    "autograde SUBMISSION --set N --format F --results FILE: one submission graded, as "
                    "those autograders run it. project OUT: the final project's handout. project-check FOLDER: "
                    "its automatic part (the component's backward pass, the translator's BLEU). The lessons come with the installed package (--lessons "
                    "to use other ones); docs/instructor.md has the syllabus and the step-by-step.")
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
    parser.add_argument("--set", dest="problem_set", type=number("set", int), default=None, metavar="N",
                        help="grade, student, nbgrader: only problem set N (week N of the syllabus); "
                             "gradescope, classroom, autograde: the problem set (required)")
    parser.add_argument("--reasons", action="store_true",
                        help="grade: also write <out>_reasons.csv, why each exercise got its points")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="autograde: text (the feedback), gradescope (results.json) or classroom "
                             "(appends result=<base64> to --results, GitHub's $GITHUB_OUTPUT)")
    parser.add_argument("--results", default=None, metavar="FILE",
                        help="autograde: where the results go (default: printed)")
    parser.add_argument("--install", default=None, metavar="SPEC",
                        help="classroom: what the workflow pip-installs (default: this npformer version "
                             "from PyPI; e.g. git+https://github.com/ORG/npformer@TAG)")
    parser.add_argument("--hidden-visibility", default="after_due_date",
                        choices=("hidden", "after_due_date", "after_published", "visible"),
                        help="gradescope, autograde --format gradescope: when students see which hidden "
                             "cases failed (default: %(default)s)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="grade, autograde, project-check: run students' code without the kernel's isolation "
                             "(bubblewrap or an unprivileged user; docs/instructor.md): only for work you trust, "
                             "or where the student owns the machine anyway (GitHub Classroom)")
    parser.add_argument("--roster", default=None, metavar="FILE",
                        help="grade, autograde, gradescope, variants: the class's roster (a CSV: student,submission), "
                             "from which each student's own variants are drawn with --secret")
    parser.add_argument("--variants", choices=("student", "class", "off"), default=None,
                        help="grade, autograde, gradescope: student (each student's own, the default with "
                             "--roster), class (one per class), off (the lessons' forms, the default without a "
                             "roster)")
    parser.add_argument("--metadata", default=None, metavar="FILE",
                        help="autograde: Gradescope's submission_metadata.json, whose submitters the roster names")
    parser.add_argument("--data", default=None, metavar="FILE",
                        help="project-check: your held-out pairs of the student's language pair (default: the "
                             "run's own test split)")
    parser.add_argument("--threshold", type=number("threshold", float), default=None,
                        help="project-check: the BLEU (beam 4) a translator must reach (default: 15)")
    parser.set_defaults(handler=run)


def _check_paths(args: argparse.Namespace) -> None:
    """Every folder read exists and every file or folder written can be, before any work (a
    ``--lessons`` folder is checked by the course itself, which says what it looked for)."""
    if args.action in ("gradescope", "classroom", "autograde"):
        require(args.problem_set is not None, f"needs the problem set: npformer course {args.action} ... --set N "
                                              "(the week of the syllabus, 1 to 13)")
    if args.action in ("grade", "autograde", "project-check") and not args.no_isolation:
        from ..course import isolation
        try:
            isolation.require()
        except isolation.IsolationUnavailable as error:
            raise UsageError(str(error)) from None
    if args.action == "variants":
        require(bool(args.out) and args.roster and args.secret, "needs a folder to write, the roster and the secret: "
                "npformer course variants OUT --roster FILE --secret FILE")
        check_folder_can_be_created(args.out)
    if args.roster is not None:
        require(Path(args.roster).is_file(), f"--roster {args.roster}: no such file (a CSV: student,submission)")
    if _variant_mode(args) == "student":
        require(args.roster is not None, "--variants student needs the roster: --roster FILE (student,submission)")
    if _variant_mode(args) != "off":
        require(args.secret is not None, f"--variants {_variant_mode(args)} needs the secret the variants are drawn "
                                         "from: --secret FILE")
    if args.action == "secret":
        require(bool(args.out), "needs the file to write: npformer course secret FILE")
        check_folder_can_be_created(str(Path(args.out).parent))   # a folder of its own, made if need be
    elif args.action == "project-check":
        require(bool(args.out), "needs the student's project folder: npformer course project-check FOLDER")
        require(Path(args.out).is_dir(), f"{args.out} is not a folder (a student's project)")
        require(args.data is None or Path(args.data).is_file(), f"--data {args.data}: no such file (your held-out pairs)")
    elif args.action == "gradescope":
        require(bool(args.out), "needs the zip to write: npformer course gradescope OUT.zip --set N")
        writable_files(args.out)
    elif args.action == "autograde":
        require(bool(args.out), "needs the submission: npformer course autograde FOLDER --set N")
        if args.results:
            writable_files(args.results)
    elif args.action in ("collect", "grade"):
        what = "the folder of your lessons" if args.action == "collect" else "the folder of submissions (one per student)"
        require(bool(args.out), f"needs {what}: npformer course {args.action} FOLDER --out FILE")
        writable_files(_written_file(args))
    elif args.action != "exercises":
        require(bool(args.out), f"needs an output folder: npformer course {args.action} OUT")
        check_folder_can_be_created(args.out)


def _variant_mode(args: argparse.Namespace) -> str:
    """How the variants are drawn: ``--variants``, else per student with a roster, else none."""
    if args.action not in ("grade", "autograde", "gradescope"):
        return "off"
    return args.variants or ("student" if args.roster else "off")


def _variants(args: argparse.Namespace, secret: str | None):
    """The ``roster.Variants`` of this grading (None: the lessons' forms)."""
    from ..course.roster import Variants, read_roster
    mode = _variant_mode(args)
    if mode == "off":
        return None
    return Variants(mode, secret, read_roster(args.roster) if mode == "student" else None)


def without_rfc3987_syntax() -> None:
    """Keep ``rfc3987_syntax`` out of this process: ``cli.main`` calls it for ``npformer course`` run
    as a command (a process of its own, never when called from Python). nbformat (under jupytext and
    nbclient) imports jsonschema, which imports that package when it is installed, and it builds a
    Lark grammar at import: 1.4 of the 1.6 s that ``import nbformat`` took on a 2-core Xeon. It only
    checks the "iri" formats of JSON schemas, which no notebook uses."""
    import sys

    if "rfc3987_syntax" not in sys.modules and "jsonschema" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # an import of it raises ImportError


def run(args: argparse.Namespace) -> int:
    from .. import course
    from ..course import syllabus

    _check_paths(args)
    try:
        exercises = syllabus.problem_set(args.problem_set) if args.problem_set is not None else None
        if args.action == "collect":
            print(course.collect(args.out, _written_file(args)).summary())
        elif args.action == "secret":
            print(course.grading.write_secret(args.out))
        elif args.action == "variants":
            from ..course import variant_file
            files = variant_file.write_variants(args.out, args.roster, course.grading.read_secret(args.secret))
            print(f"wrote the variants of {len(files)} students to {args.out}: give each student their folder's "
                  f"{variant_file.FILE_NAME} (beside their lessons)")
        elif args.action == "grade":
            _grade(args, exercises)
        elif args.action == "autograde":
            _autograde(args, exercises)
        elif args.action == "gradescope":
            from ..course import gradescope
            secret = course.grading.read_secret(args.secret) if args.secret else None
            seed = args.seed if args.seed is not None else course.cases.new_seed()
            path = gradescope.build_zip(args.out, args.problem_set, seed=seed, timeout=args.timeout, secret=secret,
                                        roster=args.roster, variants=_variant_mode(args))
            print(f"wrote {path}: the Gradescope autograder of problem set {args.problem_set} "
                  f"({len(exercises)} exercises, {syllabus.points(exercises)} points, unseen seed {seed}"
                  f"{', hidden cases' if secret else ''}); upload it on the assignment's Configure Autograder page")
        elif args.action == "classroom":
            from ..course import classroom
            require(bool(args.out), "needs the folder to write: npformer course classroom OUT --set N")
            check_folder_can_be_created(args.out)
            seed = args.seed if args.seed is not None else course.cases.new_seed()
            files = classroom.write_template(args.out, args.problem_set, seed=seed, timeout=args.timeout,
                                             install=args.install, lessons_dir=args.lessons)
            print(f"wrote the template repository of problem set {args.problem_set} to {args.out} ({len(files)} "
                  "files, .github/workflows/classroom.yml among them): push it to GitHub and pick it as the "
                  "assignment's template")
        elif args.action == "project":
            from ..course import project
            require(bool(args.out), "needs the folder to write: npformer course project OUT")
            check_folder_can_be_created(args.out)
            files = project.write_handout(args.out)
            print(f"wrote the final project's handout to {args.out}: {', '.join(path.name for path in files)}")
        elif args.action == "project-check":
            from ..course import project
            threshold = args.threshold if args.threshold is not None else project.BLEU_THRESHOLD
            print(project.check_project(args.out, data=args.data, threshold=threshold, isolated=not args.no_isolation,
                                        seed=args.seed if args.seed is not None else 0))
        elif args.action == "nbgrader":
            from ..course import nbgrader_course
            weeks = [args.problem_set] if args.problem_set is not None else None
            files = nbgrader_course.write_course(args.out, weeks, lessons_dir=args.lessons)
            print(f"wrote nbgrader's course folder {args.out}: {len(files)} notebooks in "
                  f"{len(weeks or syllabus.WEEKS)} assignments (source/weekNN) and nbgrader_config.py; "
                  f"cd {args.out} && nbgrader generate_assignment week01")
        elif args.action == "exercises":
            print(course.exercise_table(args.lessons))
        elif args.action in ("student", "instructor"):
            student = args.action == "student"
            only = list(syllabus.week(args.problem_set).lessons) if args.problem_set is not None else None
            if args.notebooks:
                files = course.lesson_notebooks(args.lessons, args.out, execute=False, student=student, only=only)
            else:
                files = (course.student_edition if student else course.instructor_edition)(args.lessons, args.out,
                                                                                           only=only)
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


def _grade(args: argparse.Namespace, exercises: list[str] | None) -> None:
    """A folder of submissions graded: the CSV, the feedback, and a line per student."""
    from .. import course

    secret = course.grading.read_secret(args.secret, args.out) if args.secret else None
    variants = _variants(args, secret)
    if variants is not None:
        practice = course.grading.practice_under_variants(exercises)
        print(f"graded with variants ({variants.mode}): {len(practice)} exercises without variants are "
              f"practice and left out ({', '.join(practice)})")
    graded = course.grade_class(args.out, _written_file(args), timeout=args.timeout, seed=args.seed,
                                secret=secret, exercises=exercises, reasons=args.reasons,
                                progress=lambda name: print(f"grading {name} ...", flush=True),
                                isolated=not args.no_isolation, variants=variants)
    print(course.grading.summary(graded))
    print(f"wrote {_written_file(args)} (numbers only) and the feedback beside it")


def _autograde(args: argparse.Namespace, exercises: list[str]) -> None:
    """One submission, graded as Gradescope's and Classroom's autograders run it; a submission with
    no lesson still gets its results (0 points and why), so that the platform shows the reason.
    The results are written once the grading is done: whole (``inert.write_atomically``), except
    Classroom's line, appended to ``$GITHUB_OUTPUT``, which holds the other steps' lines too."""
    import json
    import time

    from ..course import classroom, gradescope, grading
    from ..course.cases import new_seed
    from ..course.inert import printable, write_atomically

    secret = grading.read_secret(args.secret, args.out) if args.secret else None
    seed = args.seed if args.seed is not None else new_seed()
    start = time.perf_counter()
    names = tuple(gradescope.submitters(args.metadata)) if args.metadata else ()
    grades = grading.autograde(args.out, exercises, seed=seed, secret=secret, timeout=args.timeout,
                               isolated=not args.no_isolation, variants=_variants(args, secret), roster_names=names)
    text = grading.feedback_text(grades, seed)   # printable: nothing of a student's moves the terminal
    if args.format == "gradescope":
        written = json.dumps(gradescope.results(grades, hidden_visibility=args.hidden_visibility,
                                                execution_time=time.perf_counter() - start), indent=1) + "\n"
    elif args.format == "classroom":
        written = classroom.output_line(grades)
        print(text)   # the Actions log shows every report
    else:
        written = text
    if args.results:
        if args.format == "classroom":   # $GITHUB_OUTPUT collects every step's lines: one append
            with open(args.results, "a", encoding="utf-8") as file:
                file.write(written)
        else:
            write_atomically(args.results, written)
        print(f"{printable(grades.student)}: {grades.total} of {grades.max_points} points; wrote {args.results}")
    else:
        print(written)
