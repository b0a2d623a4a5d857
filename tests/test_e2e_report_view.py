"""The report as a user sees it, in the real headless Chromium: the first screen answers what
each precision costs and buys, nothing runs off a 1280-pixel window, every plot loads."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest
from conftest import require_browser

from fixed_web_platform.cli import main as cli
from fixed_web_platform.harness.runner import SweepOptions, run_sweep
from fixed_web_platform.plan import TimingConfig, build_plan
from fixed_web_platform.results.writer import ResultWriter
from fixed_web_platform.vocabulary import BrowserName, EngineName, Platform
from fixed_web_platform.workloads import MatmulWorkload

pytestmark = pytest.mark.browser


def test_report_first_screen_fits_and_every_plot_loads(tmp_path, capsys) -> None:
    require_browser(BrowserName.CHROME)
    plan = build_plan([BrowserName.CHROME], [Platform.WEBGPU, Platform.WASM],
                      [MatmulWorkload("view", 4, 256, 256)], [32, 16, 8, 4],
                      engines=[EngineName.HARNESS, EngineName.ORT])
    timing = TimingConfig(warmup=1, min_iterations=3, min_time_s=0, max_iterations=5, timeout_s=90)
    writer = ResultWriter(tmp_path / "sweep")
    asyncio.run(run_sweep(plan, writer, SweepOptions(timing=timing)))
    writer.close()
    out = tmp_path / "report"
    assert cli.main(["report", str(writer.directory), "--output-dir", str(out), "--screenshot"]) == 0
    printed = capsys.readouterr().out
    summary = pd.read_csv(out / "summary.csv")
    settings = len(summary.groupby(["engine", "platform"]))  # the harness's WGSL, ORT on webgpu and wasm
    for width in (1280, 390):  # one headline row per ok configuration, a pick per setting
        assert f"({width} px, {len(summary)} headline rows, {settings} picks)" in printed
    assert (out / "screenshot.png").stat().st_size > 10_000
    assert (out / "screenshot-390px.png").stat().st_size > 10_000
    assert (out / "screenshot-glance-matmul.png").stat().st_size > 5_000
    html = (out / "report.html").read_text()
    assert html.index("At a glance") < html.index("How to read this") < html.index("<h2>Sweeps</h2>") \
        < html.index("Summary (ok runs)")
    # the first-of-session run is marked: process memory is not judged on the warm-up alone
    rows = pd.read_csv(writer.csv_path)
    assert rows["session_run"].min() == 0 and rows["session_run"].max() >= 1


def test_the_view_check_catches_overflow_and_broken_plots(tmp_path) -> None:
    require_browser(BrowserName.CHROME)
    from fixed_web_platform.report.screenshot import view_report

    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><h2>x</h2><div style="width:3000px;height:1000px">wide</div>'
                    '<img src="plots/missing.png"><ul><li class="pick">below the fold</li></ul>'
                    '<table class="headline" style="width:60px"><tr><th>bits</th>'
                    '<td style="overflow-wrap:anywhere">harness</td></tr></table>'
                    '<table class="env"><tr><td style="width:90px;overflow-wrap:anywhere">/usr/<wbr>bin/<wbr>'
                    'chromium_webnn_launcher</td></tr></table></body></html>')
    (view,) = view_report(page, tmp_path / "bad.png")
    assert view.overflows and view.scroll_width >= 3000
    assert view.broken_images == ["plots/missing.png"]
    assert [b["word"] for b in view.broken_words] == ["harness"]  # squeezed into 'ha/rn/es/s'
    assert [b["word"] for b in view.broken_env_words] == ["chromium_webnn_launcher"]  # '/usr/' and 'bin/' fit
    problems = view.problems()
    assert len(problems) == 5 and "breaks the word 'harness'" in problems[2] and "first screen" in problems[4]
    assert "environment cell breaks 'chromium_webnn_launcher'" in problems[3]
