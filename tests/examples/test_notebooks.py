"""Every notebook under examples/notebooks runs top to bottom in a real Jupyter kernel.

nbclient starts an IPython kernel (ipykernel) whose event loop is already running, as in
Jupyter: the notebooks' top-level `await` calls must work there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.paths import EXAMPLES

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((EXAMPLES / "notebooks").glob("*.ipynb"))


def test_there_is_a_quickstart() -> None:
    assert "quickstart.ipynb" in [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend shows plots
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError with the failing cell's traceback
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs
    )
    if path.name == "quickstart.ipynb":
        assert "won" in text and "optimizer steps 1" in text, text[-2000:]
        assert any("image/png" in o.get("data", {}) for o in outputs), "the mask plot is missing"
        assert any("text/markdown" in o.get("data", {}) for o in outputs), "no datum table"
