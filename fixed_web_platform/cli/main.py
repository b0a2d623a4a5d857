"""Command line entry: one module per subcommand (run, capabilities, report, compare, history,
sensitivity, inventory, findings).
Bad input anywhere is one line on stderr and exit status 2."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from ..errors import UsageError

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (what CI, systemd and `timeout` send), handled exactly like Ctrl-C: the
    run in progress stops, finished rows stay on disk, browsers and drivers are quit and their
    profiles removed. A KeyboardInterrupt so asyncio unwinds every task's clean-up for it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["capabilities"]:
        from .capabilities import capabilities_command

        return capabilities_command(argv[1:])
    if argv[:1] == ["report"]:
        from .report import report_command

        return report_command(argv[1:])
    if argv[:1] == ["sensitivity"]:
        from .sensitivity import sensitivity_command

        return sensitivity_command(argv[1:])
    if argv[:1] == ["compare"]:
        from .compare import compare_command

        return compare_command(argv[1:])
    if argv[:1] == ["inventory"]:
        from .inventory import inventory_command

        return inventory_command(argv[1:])
    if argv[:1] == ["findings"]:
        from .findings import findings_command

        return findings_command(argv[1:])
    if argv[:1] == ["history"]:
        from .compare import history_command

        return history_command(argv[1:])
    from .run import run_command

    return run_command(argv)


def main(argv: Sequence[str] | None = None) -> int:
    previous = {s: signal.signal(s, _raise_stopped) for s in STOP_SIGNALS}
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        name = f" by {exc}" if isinstance(exc, Stopped) else ""
        print(f"interrupted{name}; the rows measured so far are on disk", file=sys.stderr)
        return 128 + exc.signum if isinstance(exc, Stopped) else 130
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


if __name__ == "__main__":
    raise SystemExit(main())
