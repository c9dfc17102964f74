"""Execute every notebook in fast mode (BAYES_EVAL_FAST=1) and check its key table printed."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_five_notebooks():
    assert len(NOTEBOOKS) == 5, [p.name for p in NOTEBOOKS]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_fast_mode(path, monkeypatch, tmp_path):
    monkeypatch.setenv("BAYES_EVAL_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    text = "\n".join(
        out.get("text", "") or str(out.get("data", {}).get("text/plain", ""))
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )
    # every notebook ends by printing its key table under a KEY TABLE marker
    assert "KEY TABLE" in text, f"{path.name} printed no key table"
    assert os.environ["BAYES_EVAL_FAST"] == "1"
