"""Faults a hostile-but-fair user meets, in real browsers: another Firefox on Marionette's default
port, SIGTERM mid-sweep, a driver that dies. After each, nothing of ours is left running."""

from __future__ import annotations

import logging

import psutil
import pytest

from conftest import require_browser
from fixed_web_platform.browsers import launch, resolve
from fixed_web_platform.vocabulary import BrowserName

pytestmark = pytest.mark.browser


def _other_firefox_on_default_port():  # noqa: ANN202
    """A Firefox that is not ours, holding Marionette's default port 2828."""
    logging.getLogger("mozversion").setLevel(logging.WARNING)
    from marionette_driver.marionette import Marionette

    resolved = resolve(BrowserName.FIREFOX)
    other = Marionette(bin=str(resolved.binary), port=2828, headless=True, startup_timeout=60)
    other.start_session()
    return other


def test_a_firefox_on_the_default_port_is_not_mistaken_for_ours() -> None:
    require_browser(BrowserName.FIREFOX)
    other = _other_firefox_on_default_port()
    other_pid = other.session_capabilities["moz:processID"]
    try:
        ours = launch(resolve(BrowserName.FIREFOX))
        try:
            assert ours.pid != other_pid and ours.is_alive()
            assert "marionette.port=2828" not in ours.launch_args
            ours.open("about:blank")
        finally:
            scratch = ours.scratch_dir
            ours.close()
        assert not psutil.pid_exists(ours.pid) or psutil.Process(ours.pid).status() == psutil.STATUS_ZOMBIE
        assert scratch is not None and not scratch.exists()
        assert psutil.pid_exists(other_pid), "closing our Firefox killed the other one"
        other.execute_script("return 1")  # the other Firefox still answers its own client
    finally:
        other.delete_session()
        other.cleanup()
