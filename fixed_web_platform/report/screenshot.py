"""The report as a user sees it: report.html opened in the headless Chromium the harness already
drives, at a laptop's width (1280 px) and a phone's (390 px), checked and captured as PNGs.

The checks, per width:
- the page never scrolls sideways (a wide table scrolls inside its own box);
- every image loads;
- no header or cell of a headline table breaks inside a word: each cell's longest word, measured
  in the cell's own font, fits the cell's content width;
- the first pick of the at-a-glance section is on the first screen (at 1280 px);
- at 1280 px no cell of the environment's tables breaks inside a word (a path wraps after a '/',
  a name after a hyphen).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..browsers import launch, resolve
from ..vocabulary import BrowserName

WIDTH = 1280
PHONE_WIDTH = 390
HEIGHT = 900
_FACTS_JS = """
const done = arguments[arguments.length - 1];
const canvas = document.createElement('canvas');
const ctx = canvas.getContext('2d');
const brokenWords = [];
for (const cell of document.querySelectorAll('table.headline th, table.headline td')) {
  const style = getComputedStyle(cell);
  ctx.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const room = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  // the units a line may not break inside: the report's unbreakable spans, else each word
  const spans = [...cell.querySelectorAll('span.w')].map((span) => span.textContent);
  for (const word of (spans.length ? spans : cell.textContent.split(/\\s+/)).filter(Boolean)) {
    const width = ctx.measureText(word).width;
    if (width > room + 0.5) brokenWords.push({word, width: Math.round(width), room: Math.round(room)});
  }
}
// the environment's tables (browser binaries, adapters) at a laptop's width: a path may wrap
// after a '/' (and a name after its hyphens, as text does), never inside a name
const brokenEnvWords = [];
for (const cell of document.querySelectorAll('table.env td')) {
  const style = getComputedStyle(cell);
  ctx.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const room = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  for (const word of cell.textContent.split(/\\s+/).flatMap((w) => w.split(/(?<=[\\/-])/)).filter(Boolean)) {
    const width = ctx.measureText(word).width;
    if (width > room + 0.5) brokenEnvWords.push({word, width: Math.round(width), room: Math.round(room)});
  }
}
const pick = document.querySelector('li.pick');
Promise.all([...document.images].map((img) => img.decode().catch(() => null))).then(() => done({
  scrollWidth: document.documentElement.scrollWidth,
  clientWidth: document.documentElement.clientWidth,
  images: [...document.images].map((img) => ({src: img.getAttribute('src'), width: img.naturalWidth})),
  headlineRows: document.querySelectorAll('table.headline tbody tr').length,
  headlineCells: document.querySelectorAll('table.headline th, table.headline td').length,
  picks: [...document.querySelectorAll('li.pick')].map((li) => li.textContent),
  firstPickTop: pick ? pick.getBoundingClientRect().top : null,
  brokenWords,
  brokenEnvWords,
  firstHeading: (document.querySelector('h2') || {}).textContent || '',
}));
"""


@dataclass(frozen=True)
class ReportView:
    width: int
    scroll_width: int
    client_width: int
    images: list[dict]
    headline_rows: int
    headline_cells: int
    picks: list[str]
    first_pick_top: float | None
    broken_words: list[dict]
    first_heading: str
    screenshot: Path
    section_shots: list[Path] = field(default_factory=list)
    broken_env_words: list[dict] = field(default_factory=list)
    """Words of the environment tables wider than their cell (a path may wrap after '/')."""

    @property
    def overflows(self) -> bool:
        return self.scroll_width > self.client_width

    @property
    def broken_images(self) -> list[str]:
        return [str(i.get("src")) for i in self.images if not i.get("width")]

    def problems(self, height: int = HEIGHT) -> list[str]:
        """What a reader at this width would trip over (empty: none)."""
        found = [f"at {self.width} px the page is {self.scroll_width} px wide in a {self.client_width} px window"] \
            if self.overflows else []
        found += [f"plot did not load: {src}" for src in self.broken_images]
        found += [f"at {self.width} px a headline cell breaks the word {b['word']!r} ({b['width']} px in "
                  f"{b['room']} px)" for b in self.broken_words]
        if self.width >= WIDTH:
            found += [f"at {self.width} px an environment cell breaks {b['word']!r} ({b['width']} px in "
                      f"{b['room']} px)" for b in self.broken_env_words]
        if self.width >= WIDTH and self.picks and (self.first_pick_top is None or self.first_pick_top > height):
            found.append(f"at {self.width} px the first pick is below the first screen ({self.first_pick_top} px)")
        return found


def view_report(html_path: Path, png_path: Path, *, widths: tuple[int, ...] = (WIDTH,), height: int = HEIGHT,
                sections: bool = False) -> list[ReportView]:
    """Open, check and capture the report in headless Chromium at each width (the browser is
    closed after). The first width's screenshot is ``png_path``; others add '-<width>px'.
    ``sections``: also capture each kind's at-a-glance section on its own (at the first width)."""
    session = launch(resolve(BrowserName.CHROME))
    views = []
    try:
        driver = session.driver  # type: ignore[attr-defined]
        driver.set_script_timeout(60)
        for i, width in enumerate(widths):
            driver.set_window_size(width, height)
            driver.get(Path(html_path).resolve().as_uri())
            facts = driver.execute_async_script(_FACTS_JS)
            png = Path(png_path) if i == 0 else Path(png_path).with_name(f"{Path(png_path).stem}-{width}px.png")
            driver.save_screenshot(str(png))
            shots: list[Path] = []
            if sections and i == 0:
                from selenium.webdriver.common.by import By

                for element in driver.find_elements(By.CSS_SELECTOR, "section.glance"):
                    shot = png.with_name(f"{png.stem}-{element.get_attribute('id')}.png")
                    driver.execute_script("arguments[0].scrollIntoView()", element)
                    element.screenshot(str(shot))
                    shots.append(shot)
            views.append(ReportView(
                width, int(facts["scrollWidth"]), int(facts["clientWidth"]), list(facts["images"]),
                int(facts["headlineRows"]), int(facts["headlineCells"]), [str(p) for p in facts["picks"]],
                None if facts["firstPickTop"] is None else float(facts["firstPickTop"]),
                list(facts["brokenWords"]), str(facts["firstHeading"]), png, shots,
                list(facts["brokenEnvWords"])))
    finally:
        session.close()
    return views
