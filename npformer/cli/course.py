"""``npformer course ACTION``: both editions, executed notebooks, the exercise table, collecting a
student's functions and grading a class.

Each action is a subcommand with its own flags, its own help (``npformer course grade --help``) and
its own handler, registered with ``@action``; a flag that the action does not take is a parse error.
A handler checks its paths and inputs first, then works."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import Callable, NamedTuple

from ..errors import UsageError
from ..tasks.checks import check_folder_can_be_created
from .arguments import number, require
from .inputs import writable_files

# The flags that several actions take, flag -> add_argument's keywords; an action names those it takes.
OPTIONS = {
    "--set": dict(dest="problem_set", type=number("set", int), metavar="N",
                  help="problem set N: the lessons and exercises of week N of the syllabus"),
    "--lessons": dict(metavar="FOLDER", help="a lessons folder (default: the lessons installed with npformer)"),
    "--notebooks": dict(action="store_true", help="write .ipynb notebooks (not executed) instead of .py scripts; "
                                                  "the student's carry nbgrader's cell metadata"),
    "--timeout": dict(type=number("timeout", float), default=30.0,
                      help="seconds one exercise may run (default: %(default)s)"),
    "--seed": dict(type=number("seed", int), help="the seed of the unseen cases, the same for the whole class "
                                                  "(default: drawn once, and printed)"),
    "--secret": dict(metavar="FILE", help="the instructor's secret (a file outside the submissions, written by "
                                          "npformer course secret FILE): adds hidden cases to every exercise, never "
                                          "shown in feedback"),
    "--roster": dict(metavar="FILE", help="the class's roster (a CSV: student,submission), from which each "
                                          "student's own variants are drawn with --secret"),
    "--variants": dict(choices=("student", "class", "off"),
                       help="student (each student's own, the default with --roster), class (one per class), off "
                            "(the lessons' forms, the default without a roster)"),
    "--hidden-visibility": dict(default="after_due_date", choices=("hidden", "after_due_date", "after_published",
                                                                   "visible"),
                                help="when students see on Gradescope which hidden cases failed (default: "
                                     "%(default)s)"),
    "--no-isolation": dict(action="store_true",
                           help="run students' code without the kernel's isolation (bubblewrap or an unprivileged "
                                "user; docs/instructor.md): only for work you trust, or where the student owns the "
                                "machine anyway (GitHub Classroom)"),
}


class Action(NamedTuple):
    """One ``npformer course`` action: its handler (whose docstring is its help) and its arguments."""
    handler: Callable[[argparse.Namespace], None]
    usage: str | None  # the positional and the flags it needs: "SUBMISSIONS --out FILE" (None: no positional)
    what: str | None   # what the positional is: "the folder of submissions (one per student)"
    dest: str | None   # where the positional is parsed to: out (OUT, OUT.zip), submissions, folder, file
    flags: list        # (flag, add_argument's keywords): its own, then those of OPTIONS it takes


ACTIONS: dict[str, Action] = {}  # in the order of npformer course --help


def action(name: str, usage: str | None, what: str | None, options: str = "", *, own: dict | None = None):
    """Register the decorated function as ``npformer course NAME USAGE``, which takes the flags
    ``own`` (flag -> add_argument's keywords) and ``options``, names of OPTIONS ("--set --seed")."""
    def register(handler: Callable[[argparse.Namespace], None]) -> Callable[[argparse.Namespace], None]:
        dest = usage.split()[0].split(".")[0].lower() if usage else None
        shared = [(flag, OPTIONS[flag]) for flag in options.split()]
        ACTIONS[name] = Action(handler, usage, what, dest, [*(own or {}).items(), *shared])
        return handler
    return register


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "course", help="the course: both editions, notebooks, the exercise table, collecting and grading",
        description="The course's actions, each with its own flags (npformer course ACTION --help). The lessons "
                    "come with the installed package (--lessons to use other ones); docs/instructor.md has the "
                    "syllabus and the step-by-step.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, spec in ACTIONS.items():
        description = inspect.getdoc(spec.handler)
        sub = actions.add_parser(name, help=description.partition(". ")[0].rstrip("."), description=description)
        if spec.usage:
            sub.add_argument(spec.dest, nargs="?", metavar=spec.usage.split()[0], help=spec.what)
        for flag, keywords in spec.flags:
            sub.add_argument(flag, **keywords)
        sub.set_defaults(handler=run)


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
    """The action's handler, once its positional is given; what the library refuses (a missing
    lesson, a week that does not exist, a notebook that raised) is one line, exit status 2."""
    from .. import course

    spec = ACTIONS[args.action]
    if spec.usage:
        require(bool(getattr(args, spec.dest)), f"needs {spec.what}: npformer course {args.action} {spec.usage}")
    try:
        spec.handler(args)
    except (FileNotFoundError, FileExistsError, ValueError, ImportError, course.notebooks.NotebookError) as error:
        raise UsageError(str(error)) from None
    return 0


def _exercises(args: argparse.Namespace, required: bool = False) -> list[str] | None:
    """The exercises of ``--set N`` (None without it: every one); a week that has none is refused."""
    from ..course import syllabus

    require(not required or args.problem_set is not None,
            f"needs the problem set: npformer course {args.action} ... --set N (the week of the syllabus)")
    return syllabus.problem_set(args.problem_set) if args.problem_set is not None else None


def _isolate(args: argparse.Namespace) -> None:
    """Students' code runs in the kernel's isolation unless ``--no-isolation``: one line when this
    machine cannot give it."""
    if args.no_isolation:
        return
    from ..course import isolation

    try:
        isolation.require()
    except isolation.IsolationUnavailable as error:
        raise UsageError(str(error)) from None


def _roster(path: str | None) -> None:
    require(path is None or Path(path).is_file(), f"--roster {path}: no such file (a CSV: student,submission)")


def _secret_and_mode(args: argparse.Namespace, submissions: str | None = None) -> tuple[str | None, str]:
    """The secret of ``--secret`` (None without; refused inside ``submissions``) and how the variants
    are drawn: ``--variants``, else per student with a roster, else none; each with what it needs."""
    from ..course.grading import read_secret

    _roster(args.roster)
    mode = args.variants or ("student" if args.roster else "off")
    require(mode != "student" or args.roster is not None,
            "--variants student needs the roster: --roster FILE (student,submission)")
    require(mode == "off" or args.secret is not None,
            f"--variants {mode} needs the secret the variants are drawn from: --secret FILE")
    return (read_secret(args.secret, submissions) if args.secret else None), mode


def _variants(args: argparse.Namespace, mode: str, secret: str | None):
    """The ``roster.Variants`` of this grading (None: the lessons' forms)."""
    from ..course.roster import Variants, read_roster

    return None if mode == "off" else Variants(mode, secret, read_roster(args.roster) if mode == "student" else None)


@action("student", "OUT", "an output folder", "--set --notebooks --lessons")
def student_edition(args: argparse.Namespace) -> None:
    """The student edition: the lessons without their solutions. Each solution is a stub that raises
    NotImplementedError; the classic-mistake cells and the answers are left out too. --set N: week
    N's lessons only."""
    _edition(args, student=True)


@action("instructor", "OUT", "an output folder", "--set --notebooks --lessons")
def instructor_edition(args: argparse.Namespace) -> None:
    """The instructor edition: the lessons with their solutions, classic mistakes and answers. --set
    N: week N's lessons only."""
    _edition(args, student=False)


def _edition(args: argparse.Namespace, student: bool) -> None:
    """The student or the instructor edition, as .py scripts or notebooks (``--notebooks``)."""
    from .. import course
    from ..course import syllabus

    only = list(syllabus.week(args.problem_set).lessons) if args.problem_set is not None else None
    check_folder_can_be_created(args.out)
    if args.notebooks:
        files = course.lesson_notebooks(args.lessons, args.out, execute=False, student=student, only=only)
    else:
        files = (course.student_edition if student else course.instructor_edition)(args.lessons, args.out, only=only)
    print(f"wrote the {args.action} edition of {len(files)} lessons to {args.out}")


@action("notebooks", "OUT", "an output folder", "--lessons", own={
    "--student": dict(action="store_true", help="of the student edition"),
    "--lesson": dict(action="append", type=number("lesson", int), metavar="NN",
                     help="only this lesson (repeat for several; default: all)"),
    "--no-execute": dict(action="store_true", help="convert without running"),
    "--quick": dict(action="store_true", help="short trainings (NPFORMER_QUICK=1), as the tests run them")})
def executed_notebooks(args: argparse.Namespace) -> None:
    """The lessons as executed Jupyter notebooks (needs the course extra)."""
    from .. import course

    check_folder_can_be_created(args.out)
    only = [f"{number:02d}" for number in args.lesson] if args.lesson else None
    files = course.lesson_notebooks(args.lessons, args.out, execute=not args.no_execute, student=args.student,
                                    quick=args.quick, only=only)
    print(f"wrote {len(files)} {'executed ' if not args.no_execute else ''}notebook"
          f"{'s' if len(files) != 1 else ''} to {args.out}")


@action("site", "OUT", "an output folder", "--lessons", own={
    "--executed": dict(metavar="DIR", help="the lessons' executed notebooks (NPFORMER_EXECUTED_LESSONS=DIR python -m "
                                           "pytest tests/test_lessons.py writes them); default: run the lessons here"),
    "--instructor": dict(action="store_true", help="the instructor edition's site, solutions shown (for TAs)")})
def course_site(args: argparse.Namespace) -> None:
    """The course as a website, built offline (needs the docs extra): the lessons run, the guides, the API."""
    import time

    from ..course import site

    check_folder_can_be_created(args.out)
    start = time.perf_counter()
    index = site.build_site(args.out, executed=args.executed, instructor=args.instructor, lessons=args.lessons)
    print(f"wrote {index} in {time.perf_counter() - start:.1f} s (open it in a browser)")


@action("exercises", None, None, "--lessons")
def exercise_table(args: argparse.Namespace) -> None:
    """The table of graded exercises and open questions."""
    from .. import course

    print(course.exercise_table(args.lessons))


@action("collect", "FOLDER --out FILE", "the folder of your lessons (.py or .ipynb)", own={
    "--out": dict(default="my_npformer.py", metavar="FILE", help="the module to write (default: %(default)s)")})
def collect_functions(args: argparse.Namespace) -> None:
    """Your graded functions, from your lessons, in one module for npformer train --ops FILE."""
    from .. import course

    writable_files(args.out)
    print(course.collect(args.folder, args.out).summary())


@action("grade", "SUBMISSIONS --out FILE", "the folder of submissions (one per student)",
        "--set --timeout --seed --secret --roster --variants --no-isolation", own={
            "--out": dict(default="grades.csv", metavar="FILE",
                          help="the CSV to write, numbers only (default: %(default)s)"),
            "--reasons": dict(action="store_true", help="also write <out>_reasons.csv, why each exercise got its "
                                                        "points"),
            "--reveal-fixes": dict(action="store_true", help="the feedback's hints also name the fix (by default "
                                                             "they say only what property of the answer fails)")})
def grade_class(args: argparse.Namespace) -> None:
    """A class graded: one CSV row per student, feedback files beside the CSV. Every student folder
    of SUBMISSIONS is graded in fresh processes, a line per student printed; the sheet holds numbers
    only (--reasons adds a grid of why), --secret FILE adds your hidden cases."""
    from .. import course

    exercises = _exercises(args)
    _isolate(args)
    writable_files(args.out)
    secret, mode = _secret_and_mode(args, args.submissions)
    variants = _variants(args, mode, secret)
    if variants is not None:
        practice = course.grading.practice_under_variants(exercises)
        print(f"graded with variants ({variants.mode}): {len(practice)} exercises without variants are "
              f"practice and left out ({', '.join(practice)})")
    graded = course.grade_class(args.submissions, args.out, timeout=args.timeout, seed=args.seed, secret=secret,
                                exercises=exercises, reasons=args.reasons,
                                progress=lambda name: print(f"grading {name} ...", flush=True),
                                isolated=not args.no_isolation, variants=variants, reveal_fixes=args.reveal_fixes)
    print(course.grading.summary(graded))
    print(f"wrote {args.out} (numbers only) and the feedback beside it")


@action("workload", "LOG", "a student's log (NPFORMER_WORKLOG); more with --logs", "--lessons", own={
    "--logs": dict(nargs="*", default=[], metavar="LOG", help="more students' logs")})
def workload(args: argparse.Namespace) -> None:
    """How long each exercise took the students whose logs you have (NPFORMER_WORKLOG=FILE set while
    they worked: every check appends its time and verdict), beside the difficulty rule's estimate."""
    from ..course import difficulty, worklog

    logs = [args.log, *args.logs]
    require(args.log is not None, "course workload: give a student's log (the file NPFORMER_WORKLOG named)")
    for log in logs:
        require(Path(log).is_file(), f"course workload: {log}: no such file (a student's NPFORMER_WORKLOG)")
    lines = difficulty.answer_lines(args.lessons)
    print(worklog.workload_table(logs, lambda name: difficulty.minutes(name, lines.get(name, 0))))


@action("secret", "FILE", "the file to write")
def new_secret(args: argparse.Namespace) -> None:
    """A new instructor's secret, from which the hidden cases and the variants are drawn. Keep it
    outside the submissions."""
    from .. import course

    check_folder_can_be_created(str(Path(args.file).parent))   # a folder of its own, made if need be
    print(course.grading.write_secret(args.file))


@action("variants", "OUT --roster FILE --secret FILE", "a folder to write", "--roster --secret")
def variant_files(args: argparse.Namespace) -> None:
    """Each roster student's variants file, drawn from the secret. Hand it out beside their lessons."""
    from ..course import grading, variant_file

    require(bool(args.roster and args.secret),
            "needs the roster and the secret: npformer course variants OUT --roster FILE --secret FILE")
    _roster(args.roster)
    check_folder_can_be_created(args.out)
    files = variant_file.write_variants(args.out, args.roster, grading.read_secret(args.secret))
    print(f"wrote the variants of {len(files)} students to {args.out}: give each student their folder's "
          f"{variant_file.FILE_NAME} (beside their lessons)")


@action("nbgrader", "OUT", "an output folder", "--set --lessons")
def nbgrader_folder(args: argparse.Namespace) -> None:
    """A course folder for nbgrader, one assignment per week. --set N: week N only. Its source holds
    the solutions: built from the checkout npformer was installed from, or --lessons CLONE/lessons."""
    from ..course import nbgrader_course, syllabus

    check_folder_can_be_created(args.out)
    weeks = [args.problem_set] if args.problem_set is not None else None
    files = nbgrader_course.write_course(args.out, weeks, lessons_dir=args.lessons)
    print(f"wrote nbgrader's course folder {args.out}: {len(files)} notebooks in "
          f"{len(weeks or syllabus.WEEKS)} assignments (source/weekNN) and nbgrader_config.py; "
          f"cd {args.out} && nbgrader generate_assignment week01")


@action("gradescope", "OUT.zip --set N", "the zip to write",
        "--set --timeout --seed --secret --roster --variants --hidden-visibility")
def gradescope_zip(args: argparse.Namespace) -> None:
    """The Gradescope autograder of problem set N. Upload the zip on the assignment's Configure
    Autograder page."""
    from ..course import cases, gradescope, syllabus

    exercises = _exercises(args, required=True)
    writable_files(args.out)
    secret, mode = _secret_and_mode(args)
    seed = args.seed if args.seed is not None else cases.new_seed()
    path = gradescope.build_zip(args.out, args.problem_set, seed=seed, timeout=args.timeout, secret=secret,
                                roster=args.roster, variants=mode, hidden_visibility=args.hidden_visibility)
    print(f"wrote {path}: the Gradescope autograder of problem set {args.problem_set} "
          f"({len(exercises)} exercises, {syllabus.points(exercises)} points, unseen seed {seed}"
          f"{', hidden cases' if secret else ''}); upload it on the assignment's Configure Autograder page")


@action("classroom", "OUT --set N", "an output folder", "--set --timeout --seed --lessons", own={
    "--install": dict(metavar="SPEC", help="what the workflow pip-installs (default: this npformer version from "
                                           "PyPI; e.g. git+https://github.com/ORG/npformer@TAG)")})
def classroom_template(args: argparse.Namespace) -> None:
    """The GitHub Classroom template repository of problem set N. Push it to GitHub and pick it as
    the assignment's template."""
    from ..course import cases, classroom

    _exercises(args, required=True)
    check_folder_can_be_created(args.out)
    seed = args.seed if args.seed is not None else cases.new_seed()
    files = classroom.write_template(args.out, args.problem_set, seed=seed, timeout=args.timeout,
                                     install=args.install, lessons_dir=args.lessons)
    print(f"wrote the template repository of problem set {args.problem_set} to {args.out} ({len(files)} "
          "files, .github/workflows/classroom.yml among them): push it to GitHub and pick it as the "
          "assignment's template")


@action("autograde", "FOLDER --set N", "the submission",
        "--set --timeout --seed --secret --roster --variants --hidden-visibility --no-isolation", own={
            "--format": dict(choices=("text", "gradescope", "classroom"), default="text",
                             help="text (the feedback), gradescope (results.json) or classroom (appends "
                                  "result=<base64> to --results, GitHub's $GITHUB_OUTPUT)"),
            "--results": dict(metavar="FILE", help="where the results go (default: printed)"),
            "--metadata": dict(metavar="FILE", help="Gradescope's submission_metadata.json, whose submitters the "
                                                    "roster names")})
def autograde_one(args: argparse.Namespace) -> None:
    """One submission graded on problem set N, as the Gradescope and GitHub Classroom autograders
    run it. A submission with no lesson still gets its results (0 points and why), so that the
    platform shows the reason. The results are written once the grading is done: whole, except
    Classroom's line, appended to --results ($GITHUB_OUTPUT, which holds the other steps' lines)."""
    import json
    import time

    from ..course import cases, classroom, gradescope, grading
    from ..course.inert import printable, write_atomically

    exercises = _exercises(args, required=True)
    _isolate(args)
    writable_files(args.results)
    secret, mode = _secret_and_mode(args, args.folder)
    seed = args.seed if args.seed is not None else cases.new_seed()
    start = time.perf_counter()
    names = tuple(gradescope.submitters(args.metadata)) if args.metadata else ()
    grades = grading.autograde(args.folder, exercises, seed=seed, secret=secret, timeout=args.timeout,
                               isolated=not args.no_isolation, variants=_variants(args, mode, secret),
                               roster_names=names)
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


@action("project", "OUT", "an output folder")
def project_handout(args: argparse.Namespace) -> None:
    """The final project's handout."""
    from ..course import project

    check_folder_can_be_created(args.out)
    files = project.write_handout(args.out)
    print(f"wrote the final project's handout to {args.out}: {', '.join(path.name for path in files)}")


@action("project-check", "FOLDER", "the student's project folder", "--no-isolation", own={
    "--data": dict(metavar="FILE", help="your held-out pairs of the student's language pair (default: the run's "
                                        "own test split)"),
    "--threshold": dict(type=number("threshold", float), help="the BLEU (beam 4) a translator must reach "
                                                              "(default: 15)"),
    "--seed": dict(type=number("seed", int), default=0, help="the seed of the backward pass's check "
                                                             "(default: %(default)s)")})
def check_project(args: argparse.Namespace) -> None:
    """The final project's automatic part: the component's backward pass, the translator's BLEU."""
    from ..course import project

    _isolate(args)
    require(Path(args.folder).is_dir(), f"{args.folder} is not a folder (a student's project)")
    require(args.data is None or Path(args.data).is_file(), f"--data {args.data}: no such file (your held-out pairs)")
    threshold = args.threshold if args.threshold is not None else project.BLEU_THRESHOLD
    print(project.check_project(args.folder, data=args.data, threshold=threshold, isolated=not args.no_isolation,
                                seed=args.seed))
