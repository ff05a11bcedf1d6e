"""`make bench` (benchmarks.run) names only modules that exist, with a main, documented in BENCHMARKS.md; one runs."""

import importlib
import importlib.util
import re
import subprocess
import sys

import pytest

from benchmarks import run


def section(heading: str) -> str:
    """The text of one BENCHMARKS.md section, up to the next heading of its level."""
    text = run.DOCUMENT.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_every_figure_is_a_module_with_a_main():
    assert len({f.name for f in run.FIGURES}) == len(run.FIGURES)
    for figure in run.FIGURES:
        assert figure.module == f"benchmarks.{figure.name}"
        assert importlib.util.find_spec(figure.module) is not None, figure.module
        module = importlib.import_module(figure.module)
        assert callable(getattr(module, "main", None)), f"{figure.module} has no main()"
        assert f"python -m {figure.module}" in (module.__doc__ or ""), f"{figure.module}'s docstring shows no command"


def test_every_benchmark_module_with_a_main_is_a_figure():
    modules = {path.stem for path in (run.REPO / "benchmarks").glob("*.py")
               if path.stem not in ("__init__", "run") and "\ndef main(" in path.read_text()}
    assert modules <= set(run.BY_NAME), f"not run by make bench: {sorted(modules - set(run.BY_NAME))}"


def test_every_figure_lands_in_a_section_that_shows_its_command():
    for figure in run.FIGURES:
        if figure.section is None:
            continue
        commands = re.findall(r"```sh\n(.*?)\n```", section(figure.section), re.S)
        assert commands and commands[0].strip() == figure.documented(), (figure.name, commands[:1])


def test_make_bench_runs_this_runner():
    makefile = (run.REPO / "Makefile").read_text()
    assert re.search(r"^bench:.*\n\t\$\(BIN\)/python -m benchmarks\.run\b", makefile, re.M)


@pytest.mark.slow
def test_one_cheap_figure_runs_quick(tmp_path):
    result = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--only", "combinations",
                             "--out", str(tmp_path)], cwd=run.REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    output = (tmp_path / "combinations.md").read_text()
    assert "| combination | spec | files |" in output and "bpe/tokenizers/byte-level gpt2" in output
    index = (tmp_path / "INDEX.md").read_text()
    assert "combinations: ok" in index and "BENCHMARKS.md §" in index
