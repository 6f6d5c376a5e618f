"""The one build step pyproject.toml cannot say: the course's notebooks go into the wheel.

``mha_course/course/`` in the wheel holds notebooks/*.ipynb, docs/glossary.md and README.md as
they are in the repository (the source of truth stays in one place), so ``mha-course start`` and
``mha-course student`` find the course after ``pip install mha-course`` without a clone
(``tools.student.course_notebooks``). An editable install reads the clone's own folders instead.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# what a student copy holds: every notebook and the files the notebooks link to (tests/cross/test_packaging.py)
COURSE_FILES = ["notebooks/*.ipynb", "docs/glossary.md", "README.md"]


class BuildPyWithCourse(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "mha_course" / "course"
        for pattern in COURSE_FILES:
            found = sorted(ROOT.glob(pattern))
            if not found:
                raise SystemExit(f"setup.py: no {pattern} in {ROOT}: the wheel would ship no course")
            for src in found:
                dst = target / src.relative_to(ROOT)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)


setup(cmdclass={"build_py": BuildPyWithCourse})
