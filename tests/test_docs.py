"""The documentation: the site builds with --strict (every page in the nav, every link and
anchor resolves), the reference pages are what the code generates today, and the README's links
lead somewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixed_web_platform import docs_reference

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]  # not --quiet: it hides the warnings --strict counts


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MKDOCS, "--config-file", str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=300,
                          env=os.environ | {"NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "columns" / "index.html").is_file()


def test_a_page_missing_from_the_nav_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs" / "orphan.md").write_text("# Nobody links here\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "orphan.md" in done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(docs_reference.PAGES))
def test_the_reference_is_what_the_code_says(name: str) -> None:
    committed = (docs_reference.REFERENCE_DIR / name).read_text()
    assert committed == docs_reference.PAGES[name](), (
        f"docs/reference/{name} is stale: run .venv/bin/python -m fixed_web_platform.docs_reference")


def test_the_reference_names_every_option_column_and_outcome() -> None:
    from fixed_web_platform.cli.run import build_parser
    from fixed_web_platform.results.rows import ResultRow
    from fixed_web_platform.vocabulary import Outcome

    cli, columns, outcomes = (docs_reference.PAGES[n]() for n in ("cli.md", "columns.md", "outcomes.md"))
    options = [o for a in build_parser()._actions for o in a.option_strings if o.startswith("--") and o != "--help"]  # noqa: SLF001
    assert all(f"`{o}`" in cli for o in options)
    assert all(f"| `{c}` |" in columns for c in ResultRow.columns())
    assert all(f"| `{o.value}` |" in outcomes for o in Outcome)
    # every core column and every outcome says what it means
    assert not re.search(r"^\| `\w+` \| [^|]+ \|\s*\|$", columns, re.M)
    assert not re.search(r"^\| `\w+` \| (yes|no) \|\s*\|$", outcomes, re.M)


def test_every_readme_link_leads_to_a_file() -> None:
    text = (ROOT / "README.md").read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)
               if not t.startswith(("http", "#"))]
    assert targets and not [t for t in targets if not (ROOT / t).exists()]
    assert 150 <= len(text.splitlines()) <= 250  # a front door; the rest lives in docs/


def test_the_hand_written_flag_tables_name_only_options_that_exist() -> None:
    """guides/sweeps.md explains the flags in context by hand: a renamed or removed option fails here."""
    known = {o for _, build in docs_reference._parsers() for a in build()._actions for o in a.option_strings}  # noqa: SLF001
    named = {flag for line in (ROOT / "docs" / "guides" / "sweeps.md").read_text().splitlines()
             if line.startswith("| `-") for flag in re.findall(r"--[a-z][a-z0-9-]*", line.split("|")[1])}
    assert len(named) > 30 and not named - known, sorted(named - known)


MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:work|tmp|root|home|Users|mnt|srv|opt|scratch)/[^\s)`'\"|]*")
"""An absolute path of the machine a page was written on (a checkout, a scratch folder, a home)."""


def test_no_page_names_a_path_of_the_machine_it_was_written_on() -> None:
    """Commands and paths on every page work from the project's root on any machine: a findings
    command names ``results/<folder>``, not the scratch folder it wrote to (findings/page.py)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}: {hit}" for page in pages for hit in MACHINE_PATH.findall(page.read_text())]
    assert not found, found
    assert MACHINE_PATH.findall("ran `--output-dir /work/sweep/x` and /tmp/a.npz") == ["/work/sweep/x", "/tmp/a.npz"]


def test_the_steady_state_page_states_each_kinds_protocol_as_the_code_sets_it() -> None:
    """docs/concepts/steady-state.md's table of the models' protocol (warm-up, minimum, cap, what
    the cap waits for) is
    each kind's KindTiming: a cap changed in code and not on the page (or the other way) fails."""
    from fixed_web_platform.workloads import KINDS, MATMUL

    text = (ROOT / "docs" / "concepts" / "steady-state.md").read_text()
    rows = {cells[0]: cells[-4:] for line in text.splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]] if len(cells) == 7}
    for kind in KINDS:
        if kind is MATMUL:
            continue
        t = kind.kind_timing
        assert rows.get(kind.name) == [str(t.warmup), str(t.min_iterations), f"{t.steady_cap_s:g} s",
                                       str(t.cap_waits)], kind.name
