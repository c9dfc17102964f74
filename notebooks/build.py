"""Build the .ipynb notebooks from their py-percent sources in notebooks/src/.

Cells start with ``# %%`` (code) or ``# %% [markdown]`` (markdown; each line's leading ``# ``
is stripped). Run ``uv run python notebooks/build.py`` after editing a source. The notebooks are
committed without outputs; ``tests/test_notebooks.py`` executes them in fast mode
(``BAYES_EVAL_FAST=1``).
"""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).parent


def parse(text: str) -> list:
    cells = []
    kind, lines = None, []

    def flush() -> None:
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(
                ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in body.splitlines()
            )
            cells.append(nbformat.v4.new_markdown_cell(body))
        elif body.strip():
            cells.append(nbformat.v4.new_code_cell(body))

    for line in text.splitlines():
        if line.startswith("# %%"):
            flush()
            kind = "markdown" if "[markdown]" in line else "code"
            lines = []
        else:
            lines.append(line)
    flush()
    return cells


def build(src: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = parse(src.read_text())
    for i, cell in enumerate(nb.cells):  # deterministic ids: rebuilding changes nothing
        cell["id"] = f"{src.stem[:2]}-{i:02d}"
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    out = HERE / (src.stem + ".ipynb")
    nbformat.write(nb, out)
    return out


if __name__ == "__main__":
    for src in sorted((HERE / "src").glob("*.py")):
        print("built", build(src).name)
