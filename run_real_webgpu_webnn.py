#!/usr/bin/env python3
"""Entry point: measure what 16/8/4/2-bit precision costs and buys in real browsers.

See README.md for the flags; the work is done by the ``fixed_web_platform`` package.
"""

from fixed_web_platform.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
