"""What pyproject.toml cannot say: the repository's top-level ``lessons/`` folder ships inside the
package as ``npformer.lessons``, so that an installed npformer has its course, and it ships as the
**student edition**: every solution a stub, no classic-mistake cell, no answer to an open question
(``npformer.course.edition.student_source``). The instructor edition is the repository's
``lessons/`` folder itself, built only from a source checkout."""

import importlib.util
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


def _edition_module():
    """``npformer/course/edition.py``, loaded by path: it needs only the standard library, and the
    package itself (NumPy...) may not be importable while the wheel is built."""
    path = Path(__file__).resolve().parent / "npformer" / "course" / "edition.py"
    spec = importlib.util.spec_from_file_location("npformer_edition_at_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildStudentLessons(build_py):
    """``build_py``, then the lessons in the build rewritten as their student edition."""

    def run(self):
        super().run()
        edition = _edition_module()
        lessons = Path(self.build_lib) / "npformer" / "lessons"
        for path in sorted(lessons.glob("[0-9][0-9]_*.py")):
            path.write_text(edition.student_source(path.read_text(encoding="utf-8"), path.name), encoding="utf-8")
        readme = lessons / "README.md"
        if readme.exists():
            readme.write_text(edition.student_readme(readme.read_text(encoding="utf-8")), encoding="utf-8")


setup(packages=find_packages(include=["npformer*"]) + ["npformer.lessons"],
      package_dir={"npformer.lessons": "lessons"},
      cmdclass={"build_py": BuildStudentLessons})
