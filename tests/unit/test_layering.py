"""The dependency points one way: service → tokenmill ← workers. The core imports neither, nor their frameworks."""

import subprocess
import sys

from tests.services import REPO

PROBE = """
import importlib, pkgutil, sys
import tokenmill
for module in pkgutil.walk_packages(tokenmill.__path__, "tokenmill."):
    if module.name != "tokenmill.__main__":
        importlib.import_module(module.name)
print(sorted({name.split(".")[0] for name in sys.modules} & {"service", "workers", "fastapi", "celery", "starlette"}))
"""


def test_the_core_imports_no_service_and_no_worker():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_the_training_pipeline_imports_the_evaluation_engine_only_to_evaluate():
    # A job with no evaluation corpora never pays for numba and the compiled kernels (~75 MiB).
    probe = "import sys, tokenmill.jobs.pipeline; print(sorted({'numba', 'tokenmill.evaluation.measuring'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_the_dashboard_imports_no_api_route():
    # service/web and service/routes are two faces of the same core: what both need lives in
    # tokenmill/ (queries, runs) or in service/ beside them (downloads, schemas), never in a route.
    import ast

    offenders = []
    for path in sorted((REPO / "service" / "web").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            offenders += [f"{path.name}: {name}" for name in names if name.startswith("service.routes")]
    assert offenders == []


# The core's packages, lowest first: each imports only the foundation and the packages before
# it (lazily inside a function or not), so the layout reads top-down and no package loops back.
LAYERS = ["queued_work", "formats", "sandboxed", "corpora", "training", "versions", "evaluation", "playground", "jobs"]
FOUNDATION = {"settings", "db", "models", "store", "errors", "pagination", "teams", "quotas", "allocator"}
ENTRY_POINTS = {"cli", "client", "embedded", "__main__"}


def _part(module: str) -> str | None:
    bits = module.split(".")
    if bits[0] != "tokenmill" or len(bits) < 2:
        return None
    return "foundation" if bits[1] in FOUNDATION else "entry" if bits[1] in ENTRY_POINTS else bits[1]


def _imports(path) -> list[str]:
    import ast

    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def test_the_core_packages_are_layered():
    core = REPO / "tokenmill"
    parts = {path.name for path in core.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert parts == set(LAYERS), "a new package of the core takes its place in LAYERS"
    rank = {"foundation": -1, **{name: index for index, name in enumerate(LAYERS)}, "entry": len(LAYERS)}
    offenders = []
    for path in sorted(core.rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        mine = _part(module.removesuffix(".__init__"))
        for name in _imports(path):
            theirs = _part(name)
            if theirs is not None and theirs != mine and rank[theirs] > rank[mine]:
                offenders.append(f"{module} imports {name}")
    assert offenders == []
    assert {path.stem for path in core.glob("*.py")} == FOUNDATION | ENTRY_POINTS | {"__init__"}
