"""Bad input is one line and exit status 2, in every command: the pieces they share."""

from __future__ import annotations

import argparse
from typing import NoReturn


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


class PageDataError(ValueError):
    """The page posted something that does not have the agreed shape (page_protocol.py checks
    the common reply, a workload kind its own fields)."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse without the usage dump: a parse error becomes a UsageError."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an error's message (driver errors carry stack traces)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
