"""Ship the lessons inside the package: an installed collsim runs and copies them (and the
example programs they run).

The lessons live in the repository's ``lessons/`` (the one source the course edits); a
build copies them into ``collsim/course/lessons/``, where ``collsim.course.catalog`` finds
them through ``importlib.resources``.  Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

LESSON_FILES = ("[0-9][0-9]_*.py", "solutions/[0-9][0-9]_*.py", "ja/[0-9][0-9]_*.md", "ja/*.md")
# the example programs a lesson runs unchanged (collsim.course.catalog.course_example)
LESSON_EXAMPLES = ("mpi_heat_stencil.py",)


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
        examples = Path(self.build_lib) / "collsim" / "course" / "examples"
        examples.mkdir(parents=True, exist_ok=True)
        for name in LESSON_EXAMPLES:
            shutil.copyfile(Path(__file__).parent / "examples" / name, examples / name)


setup(cmdclass={"build_py": BuildWithLessons})
