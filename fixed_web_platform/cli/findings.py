"""``findings``: regenerate the findings pages (docs/findings/) from the result folders committed
under results/findings/, and the plots of each page written or missing (docs/findings/plots/);
``--check`` says which pages differ from their data instead (exit 1; plots are not compared)."""

from __future__ import annotations

from pathlib import Path

from ..errors import OneLineArgumentParser
from ..findings import DATA_DIR, PAGES, PAGES_DIR, render
from ..findings.page import draw, plot_path


def build_parser() -> OneLineArgumentParser:
    p = OneLineArgumentParser(prog="run_real_webgpu_webnn.py findings",
                              description="Regenerate the findings pages from their committed result folders.")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs from its data")
    p.add_argument("--data", type=Path, default=None, help="the result folders (default results/findings/)")
    p.add_argument("--out", type=Path, default=None, help="where the pages go (default docs/findings/)")
    return p


def index(pages: list[tuple[str, str]]) -> str:
    lines = ["# Findings", "", "Every published figure of the project, each page generated from the result folders "
             "committed under `results/findings/` by `run_real_webgpu_webnn.py findings` (its data, date, machine, "
             "browsers, engines, command and commit are on the page).", ""]
    lines += [f"- [{title}]({name}.md)" for name, title in pages]
    return "\n".join(lines) + "\n"


def findings_command(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    args.data, args.out = args.data or DATA_DIR, args.out or PAGES_DIR
    made = {f"{p.name}.md": render(p, args.data) for p in PAGES}
    made["index.md"] = index([(p.name, p.title) for p in PAGES])
    stale = [n for n, text in made.items() if not (args.out / n).is_file() or (args.out / n).read_text() != text]
    if args.check:
        for name in stale:
            print(f"{args.out / name}: differs from its data (run_real_webgpu_webnn.py findings rewrites it)")
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (args.out / name).write_text(made[name])
        print(f"wrote {args.out / name}")
    for page in PAGES:
        if f"{page.name}.md" in stale or not all(plot_path(page, p, args.out).is_file() for p in page.plots):
            for path in draw(page, args.data, args.out):
                print(f"drew {path}")
    return 0
