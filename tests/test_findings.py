"""The findings pages (fixed_web_platform/findings/) are what their committed data says: each
page regenerated from results/findings/ equals the committed one (tables and text), every folder
a page reads says which command and commit made it, and the committed data stays within its cap."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fixed_web_platform.cli import main as cli
from fixed_web_platform.findings import DATA_CAP_BYTES, DATA_DIR, PAGES, PAGES_DIR, Page, render
from fixed_web_platform.findings.page import KEPT_FILES, plot_path


def test_every_page_is_what_its_data_says(tmp_path: Path) -> None:
    assert cli.main(["findings", "--check"]) == 0, "run: .venv/bin/python run_real_webgpu_webnn.py findings"
    missing = [str(plot_path(page, p)) for page in PAGES for p in page.plots if not plot_path(page, p).is_file()]
    assert not missing, f"plots a page shows but nobody drew: {missing}"
    shutil.copytree(PAGES_DIR, tmp_path / "pages")
    edited = tmp_path / "pages" / f"{PAGES[0].name}.md"
    edited.write_text(edited.read_text().replace("|", "| ", 1))
    assert cli.main(["findings", "--check", "--out", str(tmp_path / "pages"), "--page", PAGES[0].name]) == 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_follows_its_data(page: Page, tmp_path: Path) -> None:
    """A figure changed in the data changes the page (it is read, not typed): the figure the page
    shows (``Page.figure``: the median ms unless named) of the ok rows of its first folder
    scaled, each by a different factor (2x, 3x, ...)."""
    data = tmp_path / "data"
    for name in page.folders:
        shutil.copytree(DATA_DIR / name, data / name)
    file, column = page.figure
    path = data / page.folders[0] / file
    rows = pd.read_csv(path, dtype=object)
    ok = rows["outcome"] == "ok"
    factors = list(range(2, 2 + int(ok.sum())))
    rows.loc[ok, column] = (pd.to_numeric(rows.loc[ok, column]) * factors).astype(str)
    rows.to_csv(path, index=False)
    assert render(page, data) != (PAGES_DIR / f"{page.name}.md").read_text()


def test_every_folder_a_page_reads_is_traceable_and_the_data_is_within_its_cap() -> None:
    read = {name for page in PAGES for name in page.folders}
    pages = {name: (PAGES_DIR / f"{page.name}.md").read_text() for page in PAGES for name in page.folders}
    for name in read:
        env = json.loads((DATA_DIR / name / "environment.json").read_text())
        made = env["provenance"]
        assert len(made["commit"]) == 40 and made["command"] and made["dirty"] is False, name
        for resumed in env.get("resumed_provenance", []):  # each resume's commit is on the page too
            assert resumed["dirty"] is False and f"`{resumed['commit'][:12]}`" in pages[name], name
        assert {p.name for p in (DATA_DIR / name).iterdir()} <= set(KEPT_FILES), name
    on_disk = {p.name for p in DATA_DIR.iterdir() if p.is_dir()}
    assert on_disk == read, f"folders no page reads: {sorted(on_disk - read)}"
    size = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    assert size <= DATA_CAP_BYTES, f"results/findings holds {size / 2**20:.1f} MiB"
