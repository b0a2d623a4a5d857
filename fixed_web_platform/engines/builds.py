"""Engine builds as data: which releases of each npm-installed engine a sweep may load, where
set-up puts each, and where the local server serves it.

Several builds of one engine are installed side by side (``.engines/<folder>``, each served at
its own URL), so one sweep can run ``--engine ort@1.30.0 ort@1.31.0-dev...`` with each row saying
which build it asked for (``RunSpec.engine_build``) and which the page loaded (the row's
``engine_version``). An engine module declares its builds, its default first; engines/install.py
(run by scripts/setup.sh) fetches them from the npm registry. Nothing downloads at run time: a build that is
not installed makes its runs' rows 'unavailable', saying how to install it.

Adding a build: one ``EngineBuild`` line in the engine's module (and its packs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..paths import ENGINES_DIR
from ..vocabulary import EngineName, with_build


@dataclass(frozen=True)
class Pack:
    """Files taken from one npm tarball: ``members`` are paths inside it (a folder takes what is
    under it), written into the build's folder by their path below the tarball's ``package/``, or
    (``flat``) by their file name."""

    npm: str
    """package@version, as ``npm pack`` takes it."""
    members: tuple[str, ...]
    flat: bool = False
    suffixes: tuple[str, ...] = ()
    """Under a folder member, only files ending so ('' or empty: every file)."""

    def wanted(self, name: str) -> bool:
        for member in self.members:
            if name == member:
                return True
            if name.startswith(member.rstrip("/") + "/"):
                return not self.suffixes or name.endswith(self.suffixes)
        return False


@dataclass(frozen=True)
class EngineBuild:
    """One installed release of an engine."""

    engine: EngineName
    version: str
    """The release as its package names it (npm's version)."""
    folder: str
    """Its folder under .engines/ (git-ignored)."""
    packs: tuple[Pack, ...]
    present: tuple[str, ...]
    """Files (relative to ``served``) that must exist for the build to count as installed."""
    served: str = ""
    """The sub-folder the server serves ('' the folder itself: wllama's is esm/)."""
    requires: tuple[tuple[str, str], ...] = ()
    """(file, text) pairs set-up checks after unpacking: a library that must pin the ORT build
    whose wasm files were taken beside it."""

    @property
    def name(self) -> str:
        return f"{self.engine}@{self.version}"

    @property
    def directory(self) -> Path:
        return ENGINES_DIR / self.folder / self.served if self.served else ENGINES_DIR / self.folder

    @property
    def url(self) -> str:
        """The URL prefix its files are served at (one per build)."""
        return f"/engines/{self.engine}/{self.version}/"

    @property
    def installed(self) -> bool:
        return all((self.directory / p).is_file() for p in self.present)

    @property
    def missing_reason(self) -> str:
        """Why its runs cannot load it ('' when installed)."""
        return "" if self.installed else (f"{self.name} is not installed in {self.directory} "
                                          "(run scripts/setup.sh)")


@dataclass(frozen=True)
class EngineChoice:
    """An engine as a sweep names it: ``ort``, or ``ort@1.31.0-dev...`` for one of its builds
    (the version in full; '' the default build)."""

    name: EngineName
    build: str = ""

    def __str__(self) -> str:
        return with_build(self.name, self.build)


def choose(engine: EngineName, builds: Sequence[EngineBuild], asked: str) -> EngineBuild:
    """The build of ``engine`` a user names: its version, or a prefix of exactly one (``1.31``
    for 1.31.0-dev...); '' is the default (the first). ValueError names the builds otherwise."""
    if not builds:
        if asked:
            raise ValueError(f"engine {engine} has no builds to choose from (it is the harness's own): "
                             f"write {engine}, not {engine}@{asked}")
        raise ValueError(f"engine {engine} has no builds")
    if not asked:
        return builds[0]
    exact = [b for b in builds if b.version == asked]
    found = exact or [b for b in builds if b.version.startswith(asked)]
    if len(found) == 1:
        return found[0]
    known = ", ".join(b.version for b in builds)
    what = "matches several" if found else "is not one"
    raise ValueError(f"{engine}@{asked} {what} of its builds ({known})")
