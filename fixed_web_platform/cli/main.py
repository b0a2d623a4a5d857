"""Command line entry: one module per subcommand (run, capabilities, report, compare).
Bad input anywhere is one line on stderr and exit status 2."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..errors import UsageError


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["capabilities"]:
        from .capabilities import capabilities_command

        return capabilities_command(argv[1:])
    if argv[:1] == ["report"]:
        from .report import report_command

        return report_command(argv[1:])
    if argv[:1] == ["compare"]:
        from .compare import compare_command

        return compare_command(argv[1:])
    from .run import run_command

    return run_command(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the rows measured so far are on disk", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
