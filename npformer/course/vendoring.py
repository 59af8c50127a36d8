"""What an autograder outside this machine carries: npformer itself, and what pip must install for it.

npformer is installed from a clone, not from a package index, so Gradescope's image and a GitHub
Classroom runner cannot fetch it by name. Their autograders bring the installed package
along instead (``copy_package``: every module, without the trained models, the lessons or caches:
0.4 MB) and install only its run-time dependencies and cloudpickle (``requirements``), which the
grading worker loads.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

LEFT_OUT = ("__pycache__", "pretrained", "lessons", "*.pyc")   # not needed to grade


def package_folder() -> Path:
    """The folder of the installed ``npformer`` package."""
    return Path(__file__).resolve().parents[1]


def copy_package(target: str | Path) -> Path:
    """Copy the installed package to ``target/npformer`` (models, lessons and caches left out)."""
    destination = Path(target) / "npformer"
    shutil.copytree(package_folder(), destination, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*LEFT_OUT))
    return destination


def requirements() -> list[str]:
    """npformer's run-time dependencies (from its installed metadata), cloudpickle (the grading
    worker loads it) and pyseccomp (the grader builds the worker's seccomp filters with it)."""
    try:
        requires = importlib.metadata.requires("npformer") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    needed = [item.split(";")[0].strip() for item in requires if "extra ==" not in item]
    return (needed or ["numpy", "matplotlib", "tqdm", "threadpoolctl"]) + ["cloudpickle", "pyseccomp"]
