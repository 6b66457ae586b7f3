"""Ship the lessons inside the package: an installed collsim runs and copies them.

The lessons live in the repository's ``lessons/`` (the one source the course edits); a
build copies them into ``collsim/course/lessons/``, where ``collsim.course.catalog`` finds
them through ``importlib.resources``.  Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

LESSON_FILES = ("[0-9][0-9]_*.py", "solutions/[0-9][0-9]_*.py", "ja/[0-9][0-9]_*.md", "ja/*.md")


class BuildWithLessons(build_py):
    """setuptools' build_py, then the lesson files into the built package."""

    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's lessons/
            return
        source = Path(__file__).parent / "lessons"
        target = Path(self.build_lib) / "collsim" / "course" / "lessons"
        for pattern in LESSON_FILES:
            for path in source.glob(pattern):
                destination = target / path.relative_to(source)
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, destination)


setup(cmdclass={"build_py": BuildWithLessons})
