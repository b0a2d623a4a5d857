"""The report as a user sees it: report.html opened in the headless Chromium the harness already
drives, at a laptop's width, checked (no sideways scrolling, every plot loaded, one at-a-glance
row per configuration) and captured as a PNG."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..browsers import launch, resolve
from ..vocabulary import BrowserName

WIDTH = 1280
HEIGHT = 900
_FACTS_JS = """
const done = arguments[arguments.length - 1];
Promise.all([...document.images].map((img) => img.decode().catch(() => null))).then(() => done({
  scrollWidth: document.documentElement.scrollWidth,
  clientWidth: document.documentElement.clientWidth,
  images: [...document.images].map((img) => ({src: img.getAttribute('src'), width: img.naturalWidth})),
  glanceRows: document.querySelectorAll('#glance tbody tr').length,
  firstHeading: (document.querySelector('h2') || {}).textContent || '',
}));
"""


@dataclass(frozen=True)
class ReportView:
    scroll_width: int
    client_width: int
    images: list[dict]
    glance_rows: int
    first_heading: str
    screenshot: Path

    @property
    def overflows(self) -> bool:
        return self.scroll_width > self.client_width

    @property
    def broken_images(self) -> list[str]:
        return [str(i.get("src")) for i in self.images if not i.get("width")]


def view_report(html_path: Path, png_path: Path, *, width: int = WIDTH, height: int = HEIGHT) -> ReportView:
    """Open, check and capture the report in headless Chromium (the browser is closed after)."""
    session = launch(resolve(BrowserName.CHROME))
    try:
        driver = session.driver  # type: ignore[attr-defined]
        driver.set_window_size(width, height)
        driver.set_script_timeout(60)
        driver.get(Path(html_path).resolve().as_uri())
        facts = driver.execute_async_script(_FACTS_JS)
        driver.save_screenshot(str(png_path))
    finally:
        session.close()
    return ReportView(int(facts["scrollWidth"]), int(facts["clientWidth"]), list(facts["images"]),
                      int(facts["glanceRows"]), str(facts["firstHeading"]), Path(png_path))
