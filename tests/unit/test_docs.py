"""The documents resolve: every link of the README and docs/ names a file that exists, every
"DESIGN §n" the code cites is a section of docs/design.md, and every setting is in the
configuration table of docs/operations.md."""

import re

from tests.services import REPO
from tokenmill.settings import Settings

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_relative_link_names_a_file_that_exists():
    broken = []
    for document in DOCUMENTS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", document.read_text()):
            if not target.startswith(("http://", "https://")) and not (document.parent / target).exists():
                broken.append(f"{document.name}: {target}")
    assert broken == []


def test_every_cited_design_section_exists():
    sections = set(re.findall(r"^## (\d+)\.", (REPO / "docs" / "design.md").read_text(), flags=re.M))
    cited = set()
    for path in [*REPO.joinpath("tokenmill").rglob("*.py"), *REPO.joinpath("service").rglob("*.py")]:
        cited |= set(re.findall(r"DESIGN §(\d+)", path.read_text()))
    assert cited and cited <= sections


def test_every_setting_is_documented():
    table = (REPO / "docs" / "operations.md").read_text()
    missing = [name for name in Settings.model_fields if f"TOKENMILL_{name.upper()}" not in table]
    assert missing == []


def test_the_readme_stays_a_readme():
    assert len((REPO / "README.md").read_text().splitlines()) <= 260
