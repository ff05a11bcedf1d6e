"""End-to-end fixtures: an HTTP client of the running stack (tests/stack.py), as a new team."""

import httpx
import pytest


@pytest.fixture
def http(stack, team_key):
    _, key = team_key
    with httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        yield client
