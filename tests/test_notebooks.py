"""The notebooks run top to bottom (their own asserts check the results)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # the quick tier (pytest -m 'not slow') skips this module


NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    notebook = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(path.parent)}}
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources=resources).execute()


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == ["01_quickstart.ipynb", "02_custom_transform.ipynb",
                                           "03_action_masking.ipynb", "04_doctor.ipynb", "05_scale_out.ipynb",
                                           "06_custom_env.ipynb", "07_recurrent.ipynb", "08_deploy.ipynb",
                                           "09_torchrl_envs.ipynb"]
