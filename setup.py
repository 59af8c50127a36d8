"""The one thing pyproject.toml cannot say: the repository's top-level ``lessons/`` folder ships
inside the package as ``npformer.lessons``, so that an installed npformer has its course."""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["npformer*"]) + ["npformer.lessons"],
      package_dir={"npformer.lessons": "lessons"})
