"""What transformers.js really ran, from its page's reply: the pages ask ORT for its verbose
session log (``session_options.logSeverityLevel`` 0, which the library passes through) and read
its node placement, so a device that silently moved nodes to ORT's CPU provider is seen; the reply
says the provider that ran most nodes (``executed_on``), the nodes elsewhere (``placement``) and
the library and ORT versions (``engine_version``)."""

from __future__ import annotations

from ...page_protocol import PageDataError, PageReply
from ...run_spec import RunSpec
from ...vocabulary import Platform
from ..base import Engine, Executed

PROVIDERS = {p.value for p in Platform}


def executed(engine: Engine, run: RunSpec, page: PageReply, compute_dtype: str) -> Executed:
    if page.executed_on not in PROVIDERS:
        raise PageDataError(f"executed_on {page.executed_on!r:.40} is not a provider")
    if not page.engine_version.startswith("transformers.js "):
        raise PageDataError(f"engine_version {page.engine_version!r:.60} does not name transformers.js")
    notes = []
    if page.executed_on != engine.platform.value:
        notes.append(f"most nodes ran on {page.executed_on}, not {engine.platform}")
    if page.placement:
        notes.append(f"ORT placed nodes: {page.placement[:400]}")
    if page.fallback:
        notes.append(page.fallback[:300])
    return Executed(run.bits, compute_dtype, page.executed_on, note="; ".join(notes))
