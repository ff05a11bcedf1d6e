"""A version's lineage names the library versions its files were made with and proven to load in."""

import tomllib
import uuid
from importlib.metadata import version

from tests.services import REPO
from tokenmill.jobs.pipeline import LIBRARIES, LOADS_WITH, lineage
from tokenmill.training.spec import resolve_spec


def pins() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + project["optional-dependencies"]["dev"]
    return dict(line.split("==", 1) for line in listed if "==" in line)


def test_recorded_libraries_are_the_pinned_ones():
    recorded = lineage(resolve_spec({}), [], uuid.uuid4())["libraries"]
    for name in (*LIBRARIES, *LOADS_WITH):
        assert recorded[name] == pins()[name], name


def test_the_loading_library_recorded_is_the_one_the_tests_load_with():
    for name, pinned in LOADS_WITH.items():
        assert version(name) == pinned
