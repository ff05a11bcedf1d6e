"""The OpenAPI document is a contract a generated client can trust: schemathesis, every check on, 30
examples per operation, finds no answer the document does not describe (status, media type, body,
headers, Allow), no schema-valid request refused and no schema-invalid one accepted.

The run is schemathesis's own engine (what `st run` drives: its examples, coverage, fuzzing and
stateful phases), in-process against the app the other API tests use, as a team of its own with a
request rate high enough that the expensive routes are reached past their 429; its checks send
requests without the key too (401). Seeded and derandomized: the same requests every run (for a given
tree: hypothesis also draws constants from the code). Nothing trains or is counted: jobs, evaluation
runs and statistics are only queued, and no worker consumes the test broker.

A schema-valid request may still be refused (422) for what no JSON schema can say: a corpus or a
version it names that the team does not have, a file's content, a spec's combination of options
(resolve_spec, a sandbox build), JSON text in a form field (schemathesis does not draw a string's
contentSchema), the order of a form's parts. Those refusals, and only those, are not failures
(BEYOND_THE_SCHEMA, AFTER_THE_FILE). Nor is a form the server took whose parts, read as the text they
are, match its schema (schemathesis judges a file part by the value it drew: null, sent as "null").
"""

import json
from collections.abc import Iterable
from email.parser import BytesParser
from email.policy import HTTP

import jsonschema_rs
import pytest
import schemathesis
from pydantic import ValidationError
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.engine import events, from_schema
from schemathesis.engine.statistic import Statistic
from schemathesis.openapi.checks import RejectedPositiveData

from tests.conftest import make_team
from tokenmill.db import transaction
from tokenmill.quotas import set_quotas
from tokenmill.training.spec import TrainingSpec

EXAMPLES = 30
SEED = 243  # issue 24, item 3

# The fields whose refusal (422) of a schema-valid request the document cannot foresee, by operation:
# rows that must be the team's, a file's content, a spec whose options the libraries cannot combine.
BEYOND_THE_SCHEMA = {
    "POST /v1/corpora": {"file"},
    "POST /v1/tokenizers/{name}/versions": {"file", "special_tokens"},
    "POST /v1/jobs": {"train_corpora", "eval_corpora", "spec"},
    "POST /v1/evaluations": {"corpora", "version"},
    "POST /v1/tokenizers/{name}/versions/{version}/encode": {"sampling"},  # the version's algorithm decides
}
# A form's field sent after a file that streams already (its description asks for the file last).
AFTER_THE_FILE = "comes after the file"


class Started:
    """The app the test client started: lifespan messages are acknowledged, not run a second time."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def beyond_the_schema(failure, case, response) -> bool:
    """Whether a failure is a schema-valid request refused for what no schema can say (see BEYOND_THE_SCHEMA)."""
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 422:
        return False
    problem = json.loads(response.content)
    field = str(problem.get("field") or "")
    if case.media_type == "multipart/form-data" and AFTER_THE_FILE in problem["detail"]:
        return True
    if "errors" in problem or field.split(".")[0] not in BEYOND_THE_SCHEMA.get(case.operation.label, ()):
        return False  # the body's shape refused (its validation errors): the document's business, always
    if field.startswith("spec"):  # a rule of resolve_spec's, if the spec is what the document says it is
        try:
            TrainingSpec.model_validate(case.body.get("spec", {}))
        except ValidationError:
            return False
    return True


def form_is_valid_as_sent(case, response) -> bool:
    """Whether a form, read as the server got it (every part text), matches its schema: schemathesis judges a
    file part by the value it drew (null, say), not by the text it sent ("null")."""
    content_type = response.request.headers.get("Content-Type", "")
    if not content_type.startswith("multipart/form-data"):
        return False
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode()
                                                  + response.request.body)
    sent = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True).decode(errors="replace")
            for part in message.iter_parts()}
    schema = case.operation.definition.raw["requestBody"]["content"]["multipart/form-data"]["schema"]
    return jsonschema_rs.validator_for(schema).is_valid(sent)


def contract_run(app, key: str) -> tuple[Statistic, list[str]]:
    """Schemathesis's engine over every operation of the app's OpenAPI document: what it found, and its errors."""
    config = schemathesis.Config.from_dict({
        "seed": SEED,
        "workers": 1,
        "headers": {"Authorization": f"Bearer {key}"},
        "generation": {"max-examples": EXAMPLES, "deterministic": True, "database": "none"},
        "checks": {"enabled": True},
    })
    schema = schemathesis.openapi.from_asgi("/openapi.json", Started(app), config=config)

    @schema.hook
    def filter_failure(context, failure, case, response):
        if isinstance(failure, AcceptedNegativeData):
            return not form_is_valid_as_sent(case, response)
        return not beyond_the_schema(failure, case, response)

    statistic, errors = Statistic(), []
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished) and event.is_test_scenario:
            statistic.on_scenario_finished(event.recorder)
        elif isinstance(event, events.NonFatalError):
            errors.append(f"{event.label}: {event.info.title}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished) and event.failures:
            statistic.record_run_check_failures(event.failures, label="after the run")
    return statistic, errors


def described(statistic: Statistic) -> Iterable[str]:
    """Each failure: where, what, the answer and the request that got it."""
    for label, groups in sorted(statistic.failures.items()):
        for group in groups.values():
            answer = "" if group.response is None else (
                f"\n    answered {group.response.status_code}: {group.response.content[:300]!r}")
            for failure in group.failures:
                yield f"{label}: {failure.title}: {failure.message}{answer}\n    {group.code_sample}"


@pytest.fixture
def contract_key(sessionmaker):
    team, key = make_team(sessionmaker)
    with transaction(sessionmaker) as session:
        set_quotas(session, team.id, {"requests_per_minute": 1_000_000})
    return key


def test_the_openapi_document_is_the_contract(app_client, contract_key):
    statistic, errors = contract_run(app_client.app, contract_key)
    failures = list(described(statistic))
    print(f"schemathesis: {statistic.total_cases} cases over {len(statistic.tested_operations)} operations, "
          f"{len(failures)} failures, {statistic.filtered_failures} left out (beyond the schema, forms as sent)")
    assert not errors, "\n".join(errors)
    assert not failures, f"{len(failures)} contract failures:\n" + "\n\n".join(failures)
    operations = sum(len(methods) for methods in app_client.get("/openapi.json").json()["paths"].values())
    assert len(statistic.tested_operations) == operations
