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


def test_the_notes_say_what_fitting_each_stage_in_memory_left_out():
    from tokenmill.versions.registry import vocabulary_notes

    def pruned(raised: bool) -> dict:
        return {"threshold": 8 if raised else 2, "min_frequency": 2, "raised": raised, "pieces_kept": 10,
                "pieces_dropped": 1234 if raised else 0, "dropped_share": 0.0285}

    spec = {"library": "tokenmill", "vocab_size": 700, "superword": {"transition_vocab_size": 500}}
    both = vocabulary_notes(spec, 700, {"pruned": pruned(True), "superword": {"stage1_pruned": pruned(True)}})
    assert [note.split(":")[0] for note in both] == ["stage 1", "to fit the job's memory, only pieces seen 8 times or more were learned from (min_frequency 2)"]
    assert "1,234 distinct pieces, 2.85 % of all occurrences, left out" in both[0]
    assert vocabulary_notes(spec, 700, {"pruned": pruned(False), "superword": {"stage1_pruned": pruned(False)}}) == []
