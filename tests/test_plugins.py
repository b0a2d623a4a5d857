"""The plug-in seams: every (engine, platform) x workload kind either has its module and page
runner or is refused with a reason when the plan is built; kinds, architectures and their columns
are registered once; the package has no import cycles and domain code never imports the report."""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
from pathlib import Path

import pytest

from fixed_web_platform.analysis.compare import compare
from fixed_web_platform.architectures import ARCHITECTURES
from fixed_web_platform.engines.registry import (
    ENGINES,
    RUNS,
    kind_runner,
    planned_refusal,
    refusal,
)
from fixed_web_platform.paths import WEB_DIR
from fixed_web_platform.plan import build_plan
from fixed_web_platform.results.reader import load
from fixed_web_platform.results.rows import ResultRow, identity_columns
from fixed_web_platform.run_spec import RunSpec
from fixed_web_platform.vocabulary import (
    BrowserName,
    EngineName,
    Platform,
    PrecisionMode,
)
from fixed_web_platform.workloads import KINDS, MatmulWorkload, kind_columns, kind_named

PACKAGE = Path(__file__).resolve().parents[1] / "fixed_web_platform"
FIXTURES = Path(__file__).parent / "fixtures" / "schema7"
ENGINE_PACKAGES = {"harness/webgpu": "wgsl", "harness/webnn": "webnn", "ort/webgpu": "ort", "ort/webnn": "ort",
                   "ort/wasm": "ort", "wllama/wasm": "wllama", "wllama/webgpu": "wllama",
                   **{f"transformersjs/{p}": "transformersjs" for p in ("wasm", "webgpu", "webnn")}}


class _Pretend:
    """A workload of any kind, for planning only (plan validation asks little of it)."""

    def __init__(self, kind: str) -> None:
        self.kind, self.name, self.label = kind, f"pretend-{kind}", kind
        self.calibration_label = ""
        self.rules = ()  # no precision rules: every weight at the run's bits
        self.model = self.name

    def op_needs(self, passes: tuple[str, ...] | None = None) -> frozenset[str]:
        return frozenset()  # a graph of nothing: every lowering runs it

    def validate(self, bits: int, block_size: int) -> None:
        pass

    def row_fields(self, bits: int, block_size: int) -> dict:
        return {}


@pytest.mark.parametrize("engine, kind", list(itertools.product(ENGINES, KINDS)),
                         ids=lambda v: getattr(v, "name", None) and f"{v.name}-{getattr(v, 'platform', '')}".rstrip("-"))
def test_every_engine_and_kind_has_its_module_and_page_runner_or_a_reason(engine, kind) -> None:  # noqa: ANN001
    runner = kind_runner(engine.name, engine.platform, kind.name)
    work = _Pretend(kind.name)
    plan = build_plan([BrowserName.CHROME], [engine.platform], [work], [8], engines=[engine.name])
    assert [r.weight_format for r in plan] == list(engine.weight_formats(work, 8))  # one run per named format
    if runner is None:
        reason = refusal(engine.name, engine.platform, kind.name)
        assert kind.name in reason and str(engine.name) in reason
        assert plan[0].refused == reason  # decided when the plan is built: no browser starts for it
        return
    assert plan[0].refused == runner.refusal(engine, plan[0])  # only the runner's own reason, if any
    module = inspect.getmodule(type(runner))
    package = ENGINE_PACKAGES[f"{engine.name}/{engine.platform}"]
    assert module.__name__ == f"fixed_web_platform.engines.{package}.{kind.name}", module.__name__
    assert (WEB_DIR / "engines" / f"{runner.runner}.js").is_file()


def test_an_unlisted_pair_is_refused_at_planning_with_the_engines_that_run_it(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delitem(RUNS, (EngineName.ORT, Platform.WASM, "matmul"))
    plan = build_plan([BrowserName.CHROME], [Platform.WASM], [MatmulWorkload("t", 2, 64, 16)], [8],
                      engines=[EngineName.ORT])
    assert "does not run matmul workloads" in plan[0].refused and "harness/webgpu" in plan[0].refused
    assert planned_refusal(plan[0]) == plan[0].refused


def test_kinds_architectures_and_columns_are_registered_once() -> None:
    names = [k.name for k in KINDS] + [a for k in KINDS for a in k.aliases]
    assert len(names) == len(set(names))
    for arch in ARCHITECTURES:
        assert kind_named(arch.kind).name == arch.kind  # an architecture plugs into a registered kind
    core = set(ResultRow.core_columns())
    columns = kind_columns()
    assert not core & {c.name for c in columns}, "a kind column shadows a core column"
    for kind in KINDS:
        own = {c.name for c in kind.columns}
        assert set(kind.identity) | set(kind.precision_identity) <= own
        for c in kind.columns:  # a column two kinds share means the same thing in both
            assert c == next(x for x in columns if x.name == c.name)
    assert set(identity_columns()) <= set(ResultRow.columns())


def _imports(path: Path, module: str) -> set[str]:
    """Every fixed_web_platform module ``path`` imports, anywhere in the file (functions too), with
    the packages Python runs on the way (importing a.b.c runs a and a.b first), except the
    module's own packages (they are already running whenever the module runs)."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            found |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)}
    parts = module.split(".")
    own = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return {m for m in found if m.startswith("fixed_web_platform.")} - own


def _graph() -> dict[str, set[str]]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return {m: _imports(p, m) & set(modules) for m, p in modules.items()}


def test_no_import_cycles_not_even_inside_functions() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_import_cycles_between_packages() -> None:
    """Collapsed to the package's top level (engines, workloads, page_protocol, ...), the imports
    still form no cycle: each package sits wholly above or below another (docs/architecture.md)."""
    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for module, imports in _graph().items():
        graph.setdefault(top(module), set()).update(top(m) for m in imports if top(m) != top(module))

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    back = sorted(f"{a} -> {b}" for a in graph for b in graph[a] if reaches(b, a))
    assert not back, f"imports on a cycle between packages: {back}"


@pytest.mark.parametrize("package", ["workloads", "architectures", "models", "engines", "precision", "harness",
                                     "results", "analysis", "plan", "run_spec", "page_protocol"])
def test_domain_code_never_imports_the_report_or_the_cli(package: str) -> None:
    graph = _graph()
    prefix = f"fixed_web_platform.{package}"
    for module, imports in graph.items():
        if module == prefix or module.startswith(prefix + "."):
            bad = {m for m in imports if m.startswith(("fixed_web_platform.report", "fixed_web_platform.cli"))}
            assert not bad, f"{module} imports {sorted(bad)}"


def test_every_package_module_imports() -> None:
    for module in _graph():
        importlib.import_module(module)


# ----------------------------------------------------------------------- folders before schema 8


def test_a_schema7_folder_reads_with_its_kinds_and_only_their_columns() -> None:
    matmul, encoder = load(FIXTURES / "matmul"), load(FIXTURES / "encoder")
    assert set(matmul.rows["kind"]) == {"matmul"} and set(encoder.rows["kind"]) == {"encoder"}
    assert (matmul.rows["m"] == 1).all() and matmul.rows["model"].eq("").all()
    assert encoder.rows["m"].isna().all()  # schema 7 wrote 0 on model rows: not a matmul's shape
    assert encoder.rows["model"].eq("all-MiniLM-L6-v2").all() and (encoder.rows["batch_size"] == 4).all()
    ok = matmul.rows["outcome"] == "ok"
    assert ok.any() and (matmul.rows.loc[ok, "steady_class"] == "not judged").all()  # before schema 11


@pytest.mark.parametrize("folder", ["matmul", "encoder"])
def test_a_schema7_folder_compares_with_itself_configuration_by_configuration(folder: str) -> None:
    result = compare(load(FIXTURES / folder), load(FIXTURES / folder))
    verdicts = {e.verdict.value for e in result.entries}
    assert verdicts <= {"unchanged", "skipped", "insufficient"}, verdicts
    assert len(result.entries) == len({tuple(r[c] for c in identity_columns())
                                       for r in load(FIXTURES / folder).rows.to_dict("records")})
    shapes = {e.shape for e in result.entries}
    assert shapes == ({"1x768x3072"} if folder == "matmul" else {"4x32 tokens"})


def test_a_pretend_run_is_a_runspec() -> None:
    """The planning test's stand-in is enough for the plan (no kind is special-cased there)."""
    run = build_plan([BrowserName.CHROME], [Platform.WEBGPU], [_Pretend("matmul")], [8])[0]
    assert isinstance(run, RunSpec) and run.precision_mode is PrecisionMode.STANDARD
