#!/usr/bin/env python3
"""Entry point: measure what 16/8/4/2-bit precision costs and buys in real browsers.

CLI: see README.md. Python (asyncio, notebooks):

    from run_real_webgpu_webnn import run_real_webnn_test, run_real_webgpu_test
    rows = await run_real_webnn_test(browser="chrome", bits=[8, 4], experimental_precision=True)
"""

from fixed_web_platform.api import run_real_test, run_real_webgpu_test, run_real_webnn_test
from fixed_web_platform.cli.main import main

__all__ = ["main", "run_real_test", "run_real_webgpu_test", "run_real_webnn_test"]

if __name__ == "__main__":
    raise SystemExit(main())
