"""Every lesson, English and Japanese, runs as a Jupyter notebook (issue 27, item 6):
`collsim lesson N --notebook` writes it into the student's copy, nbclient executes it in a
fresh kernel with no setup cell, and each lesson that draws shows its pictures inline as
image/png outputs (not the text "<Figure size ... with 2 Axes>").

The execution tests are slow (every lesson in a kernel, twice): marked ``slow``.  They
need the extra: pip install 'collsim[notebook]'."""

import re
from pathlib import Path

import pytest

from collsim.cli import main
from collsim.course.catalog import find_lessons

ROOT = Path(__file__).resolve().parents[1]
LESSONS = find_lessons(ROOT / "lessons")
INSTALL = "pip install 'collsim[notebook]'"


def draws(path):
    """How many places in the lesson show a picture (``teach.show(...)``; one inside a loop
    shows several)."""
    return len(re.findall(r"^\s*teach\.show\(", path.read_text(encoding="utf-8"), re.M))


@pytest.fixture
def copy(tmp_path, monkeypatch):
    for name in ("COLLSIM_LESSONS", "COLLSIM_SOLUTIONS", "COLLSIM_LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["lesson", "init"]) == 0
    assert main(["lesson", "init", "--lang", "ja"]) == 0
    return tmp_path / "collsim-lessons"


def test_without_the_extra_the_cli_names_the_install_command(copy, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_jupytext(name, *args, **kwargs):
        if name == "jupytext":
            raise ImportError("No module named 'jupytext'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jupytext)
    assert main(["lesson", "4", "--notebook"]) == 2
    assert INSTALL in capsys.readouterr().err
    assert not (copy / "04_ring_allreduce.ipynb").exists()


def test_a_notebook_needs_the_students_copy(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("COLLSIM_LESSONS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["lesson", "4", "--notebook"]) == 2
    assert "collsim lesson init" in capsys.readouterr().err


def test_the_notebook_is_written_once_beside_the_lesson(copy, capsys):
    pytest.importorskip("jupytext", reason=INSTALL)
    assert main(["lesson", "4", "--notebook"]) == 0
    notebook = copy / "04_ring_allreduce.ipynb"
    assert f"wrote {notebook.relative_to(copy.parent)}" in capsys.readouterr().out
    assert main(["lesson", "4", "--notebook"]) == 2  # now it may hold the student's answers
    assert "may hold your answers" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("number", sorted(LESSONS))
def test_every_lesson_runs_as_a_notebook_and_shows_its_pictures(copy, number, lang, monkeypatch):
    nbclient = pytest.importorskip("nbclient", reason=INSTALL)
    nbformat = pytest.importorskip("nbformat", reason=INSTALL)
    pytest.importorskip("ipykernel", reason=INSTALL)
    monkeypatch.setenv("MPLBACKEND", "Agg")  # as a terminal or CI has it: the pictures still show
    assert main(["lesson", str(number), "--notebook", "--lang", lang]) == 0
    folder = copy if lang == "en" else copy / "ja"
    path = folder / LESSONS[number].with_suffix(".ipynb").name
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute()  # raises CellExecutionError, with the cell, if any cell fails
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    as_text = [o for o in outputs if "<Figure size" in str(o.get("data", {}).get("text/plain"))]
    assert draws(LESSONS[number]) >= 1  # every lesson draws
    assert len(images) >= draws(LESSONS[number]) and not as_text
    said = "".join(o.get("text", "") for o in outputs)
    assert ("not_yet" not in said) and ("Traceback" not in said)
    if lang == "ja":  # the feedback speaks the notebook's language (its folder is ja/)
        assert "答え" in said or "演習" in said
