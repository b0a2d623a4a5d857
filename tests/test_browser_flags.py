"""--browser-arg / --browser-pref: parsed in one place, merged with the harness's own flags the
way Chromium reads them (its last --enable-features wins, so the values must join)."""

from __future__ import annotations

import pytest

from fixed_web_platform.browsers.products import (
    PRODUCTS,
    parse_browser_args,
    parse_browser_prefs,
    with_extras,
)
from fixed_web_platform.cli import main as cli
from fixed_web_platform.vocabulary import BrowserName


def test_a_feature_switch_joins_the_harness_own_instead_of_replacing_it() -> None:
    args = parse_browser_args(["chrome=--enable-features=Vulkan", "chrome=--use-angle=vulkan"])
    product = with_extras(PRODUCTS[BrowserName.CHROME], args[BrowserName.CHROME])
    features = [a for a in product.args if a.startswith("--enable-features=")]
    assert features == ["--enable-features=WebMachineLearningNeuralNetwork,Vulkan"]  # one switch, both kept
    assert product.args[-1] == "--use-angle=vulkan"
    assert "--enable-unsafe-webgpu" in product.args  # the harness's own stay


def test_a_pref_is_typed_and_the_users_value_wins() -> None:
    prefs = parse_browser_prefs(["firefox=gfx.webgpu.ignore-blocklist=false", "firefox=dom.max_script_run_time=0",
                                 "firefox=webgl.vendor-string-override=lab"])
    product = with_extras(PRODUCTS[BrowserName.FIREFOX], prefs=prefs[BrowserName.FIREFOX])
    assert dict(product.prefs) == {"dom.webgpu.enabled": True, "gfx.webgpu.ignore-blocklist": False,
                                   "dom.max_script_run_time": 0, "webgl.vendor-string-override": "lab"}


@pytest.mark.parametrize("flag, value, says", [
    ("--browser-arg", "firefox=--safe-mode", "Firefox takes preferences"),
    ("--browser-arg", "chrome=Vulkan", "NAME=--switch"),
    ("--browser-arg", "opera=--x", "'opera' is not a browser"),
    ("--browser-pref", "chrome=a=b", "Chromium takes switches"),
    ("--browser-pref", "firefox=novalue", "NAME=KEY=VALUE"),
])
def test_bad_flags_are_one_line_and_exit_2(flag: str, value: str, says: str, capsys, tmp_path) -> None:  # noqa: ANN001
    assert cli.main([flag, value, "--browser", "chrome", "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "out").exists()  # refused before any folder or browser
