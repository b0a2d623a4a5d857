"""``findings``: regenerate the findings pages (docs/findings/) from the result folders committed
under results/findings/, the plots of each page written or missing (docs/findings/plots/), and the
answers block of the home page and the README (findings/answers.py); ``--check`` says which differ
from their data instead (exit 1; plots are not compared). With ``--out`` the pages alone; with
``--page`` the pages named."""

from __future__ import annotations

from pathlib import Path

from ..errors import OneLineArgumentParser, UsageError
from ..findings import DATA_DIR, PAGES, PAGES_DIR, render
from ..findings.answers import ANSWER_FILES, answered, block, spliced
from ..findings.page import Folders, draw, plot_path
from ..results.reader import ResultSchemaError


def build_parser() -> OneLineArgumentParser:
    p = OneLineArgumentParser(prog="run_real_webgpu_webnn.py findings",
                              description="Regenerate the findings pages from their committed result folders.")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs from its data")
    p.add_argument("--data", type=Path, default=None, help="the result folders (default results/findings/)")
    p.add_argument("--out", type=Path, default=None, help="where the pages go (default docs/findings/)")
    p.add_argument("--page", action="append", choices=[page.name for page in PAGES], default=None,
                   help="only this page (repeatable; the home page's answers are then left as they are)")
    return p


def index(pages: list[tuple[str, str]]) -> str:
    lines = ["# Findings", "", "Every published figure of the project, each page generated from the result folders "
             "committed under `results/findings/` by `run_real_webgpu_webnn.py findings` (its data, date, machine, "
             "browsers, engines, command and commit are on the page).", ""]
    lines += [f"- [{title}]({name}.md)" for name, title in pages]
    return "\n".join(lines) + "\n"


def findings_command(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    pages_only = args.out is not None or args.page is not None
    args.data, args.out = args.data or DATA_DIR, args.out or PAGES_DIR
    if not args.data.is_dir():
        raise UsageError(f"--data {args.data}: no such folder (it holds the findings' result folders, "
                         f"by default {DATA_DIR})")
    pages = [p for p in PAGES if args.page is None or p.name in args.page]
    folders = Folders(args.data)
    try:
        made = {args.out / f"{p.name}.md": render(p, folders) for p in pages}
        if not pages_only:
            texts = answered(folders)
            made |= {path: spliced(path.read_text(), block(texts, to_pages), path)
                     for path, to_pages in ANSWER_FILES.items()}
    except ResultSchemaError as exc:
        raise UsageError(f"--data {args.data}: {exc}") from None
    made[args.out / "index.md"] = index([(p.name, p.title) for p in PAGES])
    stale = [path for path, text in made.items() if not path.is_file() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path}: differs from its data (run_real_webgpu_webnn.py findings rewrites it)")
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.write_text(made[path])
        print(f"wrote {path}")
    for page in pages:
        if args.out / f"{page.name}.md" in stale or not all(plot_path(page, p, args.out).is_file() for p in page.plots):
            for path in draw(page, folders, args.out):
                print(f"drew {path}")
    return 0
