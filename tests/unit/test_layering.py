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
    probe = "import sys, tokenmill.pipeline; print(sorted({'numba', 'tokenmill.evaluation'} & set(sys.modules)))"
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
