"""Typed responses: every JSON operation of /v1 and /healthz declares a named response schema, and
real bodies validate against the model their route declares while staying exactly what the core
returns (no key dropped, none added, no int turned float).

The bodies come from a small real setup: parallel English/Spanish corpora, a trained version and
its evaluation run, and a gpt2 run, measured by the worker's own code (tokenmill.evaluation.pipeline).
"""

import json

import pytest
from fastapi.routing import APIRoute

from service.routes import bpe, corpora, evaluations, health, jobs, tokenizers
from tests.conftest import make_team
from tests.integration.served import add_version
from tests.text import flores_lines
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.evaluation.pipeline import run_evaluation
from tokenmill.evaluation.reports import fertility_matrix, version_curve, version_evaluations
from tokenmill.evaluation.submission import get_run, run_out
from tokenmill.playground.bpe_json import run_json
from tokenmill.playground.bpe_runs import BpeStepsIn, compute
from tokenmill.playground.cost_report import combine, measured_costs, probed_costs
from tokenmill.playground.encode import encode_with_reference, encode_with_version
from tokenmill.sandboxed.subword_sampling import SamplingOptions
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import version_contents
from tokenmill.versions.registry import get_version

NAME = "typed"
VERSION = f"/v1/tokenizers/{NAME}/versions/1"
LIMITS = {"max_bytes": 10**8, "max_line_bytes": 10**6}
TEXT = "The government announced new measures."
ROUTES = (bpe, corpora, evaluations, health, jobs, tokenizers)
# Routes answering files, not JSON (their media types are documented instead).
DOWNLOADS = {("get", "/v1/tokenizers/{name}/versions/{version}/bundle.tar.gz"),
             ("get", "/v1/tokenizers/{name}/versions/{version}/files/{filename}")}
# DESIGN §4 and §6: the names clients rely on.
EVALUATION_KEYS = {"corpus_id", "domain", "language", "word_rule", "metrics"}
METRIC_KEYS = {"tokens", "words", "characters", "bytes", "fertility", "chars_per_token", "bytes_per_token",
               "continued_word_rate", "unk_rate", "byte_fallback_rate", "roundtrip_rate", "vocab_utilization",
               "shannon_efficiency", "renyi_efficiency"}


@pytest.fixture(scope="module")
def measured(sessionmaker, store, app_client):
    """A team with parallel English/Spanish news, version 1 of NAME, and a finished evaluation run of
    it and one of gpt2 (both through POST /v1/evaluations, measured as a worker would)."""
    team, key = make_team(sessionmaker)
    corpora = [ingest_corpus(sessionmaker, store, team,
                             CorpusFields(f"flores-{lang}", "news", lang, parallel_group="flores"),
                             ["\n".join(flores_lines(60, languages=(lang,))).encode()], **LIMITS)
               for lang in ("eng_Latn", "spa_Latn")]
    spec = resolve_spec({"vocab_size": 400})
    tokenizer = with_tokenizers.train(spec, flores_lines(60, languages=("eng_Latn", "spa_Latn")))
    files = version_contents(spec, tokenizer, {}, {})
    add_version(sessionmaker, store, team, NAME, spec, files, tokenizer.get_vocab_size())
    headers = {"Authorization": f"Bearer {key}"}
    queued = []
    for subject in ({"tokenizer": NAME, "version": 1}, {"reference": "gpt2"}):
        response = app_client.post("/v1/evaluations", json=subject, headers=headers)
        assert response.status_code == 202, response.text
        queued.append(response.json())
        assert run_evaluation(sessionmaker, store, response.json()["id"]) == "succeeded"
    return {"team": team, "key": key, "corpora": corpora, "queued": queued}


@pytest.fixture
def client(app_client, measured):
    app_client.headers["Authorization"] = f"Bearer {measured['key']}"
    yield app_client
    app_client.headers.pop("Authorization", None)


def declared(method: str, path: str):
    """The response model the route of `method path` declares."""
    route = next(r for module in ROUTES for r in module.router.routes
                 if isinstance(r, APIRoute) and r.path == path and method.upper() in r.methods)
    assert route.response_model is not None, f"{method} {path} declares no response model"
    return route.response_model


def as_json(value):
    return json.loads(json.dumps(value))


def same(body, expected, where: str = "body") -> None:
    """Equal as JSON and of the same JSON types (1 is not 1.0 here), with the same keys everywhere."""
    assert type(body) is type(expected), f"{where}: {body!r} is not {expected!r}"
    if isinstance(expected, dict):
        assert set(body) == set(expected), f"{where}: keys {sorted(set(body) ^ set(expected))} differ"
        for key in expected:
            same(body[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert len(body) == len(expected), f"{where}: {len(body)} items, not {len(expected)}"
        for index, (got, want) in enumerate(zip(body, expected, strict=True)):
            same(got, want, f"{where}[{index}]")
    else:
        assert body == expected, f"{where}: {body!r} != {expected!r}"


def checked(client, method: str, route: str, url: str, expected, **kwargs) -> dict:
    """The body of `method url`, validated against its route's declared model and equal to `expected`."""
    response = client.request(method, url, **kwargs)
    assert response.status_code in (200, 202), response.text
    body = response.json()
    declared(method, route).model_validate(body)
    same(body, as_json(expected))
    return body


def test_every_json_operation_declares_a_named_response_schema(app_client):
    doc = app_client.app.openapi()
    components = doc["components"]["schemas"]
    operations = [(method, path, op) for path, ops in doc["paths"].items() if path.startswith("/v1/") or path == "/healthz"
                  for method, op in ops.items()]
    assert len(operations) > 20
    for method, path, op in operations:
        success = {status: answer for status, answer in op["responses"].items() if status.startswith("2")}
        assert success, (method, path)
        if (method, path) in DOWNLOADS:
            contents = [content for answer in success.values() for content in answer["content"].values()]
            assert contents and all(c["schema"] == {"type": "string", "format": "binary"} for c in contents), path
            continue
        for status, answer in success.items():
            if status == "204":
                assert "content" not in answer, (method, path)
                continue
            schema = answer["content"]["application/json"]["schema"]
            ref = schema.get("$ref") or schema.get("items", {}).get("$ref")
            assert ref, f"{method.upper()} {path} answers {status} with an undescribed body: {schema}"
            component = components[ref.removeprefix("#/components/schemas/")]
            assert component.get("properties") or component.get("oneOf"), (method, path, component)


def test_a_versions_evaluations_are_typed_and_whole(client, measured, sessionmaker):
    team = measured["team"]
    with sessionmaker() as session:
        row = get_version(session, team, NAME, "1")
        expected = {"name": NAME, "version": 1, "items": version_evaluations(session, team, row),
                    "vocab_curve": version_curve(session, team, row)}
    route = "/v1/tokenizers/{name}/versions/{version}/evaluations"
    body = checked(client, "GET", route, f"{VERSION}/evaluations", expected)
    assert len(body["items"]) == 2 and body["vocab_curve"]
    for item in body["items"]:
        assert set(item) >= EVALUATION_KEYS and set(item["metrics"]) >= METRIC_KEYS
        assert {"word_rule", "encoded_by", "vocab_curve", "vocab_curve_sample", "premium"} <= set(item["metrics"])


def test_an_evaluation_run_is_typed_queued_and_finished(client, measured, sessionmaker):
    queued = measured["queued"][0]
    declared("POST", "/v1/evaluations").model_validate(queued)
    assert (queued["status"], queued["results"], queued["finished_at"]) == ("queued", [], None)
    with sessionmaker() as session:
        expected = run_out(session, get_run(session, measured["team"], queued["id"]))
    body = checked(client, "GET", "/v1/evaluations/{run_id}", f"/v1/evaluations/{queued['id']}", expected)
    assert body["status"] == "succeeded" and len(body["results"]) == 2
    assert all(set(result) >= EVALUATION_KEYS for result in body["results"])


def test_the_fertility_matrix_is_typed_and_whole(client, measured, sessionmaker):
    with sessionmaker() as session:
        expected = fertility_matrix(session, measured["team"])
    body = checked(client, "GET", "/v1/dashboard/fertility", "/v1/dashboard/fertility", expected)
    assert body["domains"] == ["news"] and {row["kind"] for row in body["rows"]} == {"version", "reference"}
    version = next(row for row in body["rows"] if row["kind"] == "version")
    assert "parity" in version and version["premium"]["flores"]["eng_Latn"] == 1.0
    assert all("parity" not in row for row in body["rows"] if row["kind"] == "reference")


def test_the_cost_report_is_typed_and_whole(client, measured, sessionmaker, store):
    team = measured["team"]
    with sessionmaker() as session:
        row = get_version(session, team, NAME, "1")
        measured_part = measured_costs(session, store, team, row)
    expected = combine(measured_part, probed_costs(store, row))
    body = checked(client, "GET", "/v1/tokenizers/{name}/versions/{version}/report", f"{VERSION}/report", expected)
    ghosts = body["ghost_tokens"]["subjects"]
    assert ghosts["version"]["available"] is True and ghosts["cl100k_base"]["available"] is False
    assert set(body["trailing_space"]["version"]) == {"without", "with", "extra_tokens", "last_piece"}


def test_encodes_are_typed_and_sampling_shows_only_when_sampled(client, measured, sessionmaker, store):
    with sessionmaker() as session:
        row = get_version(session, measured["team"], NAME, "1")
    route = "/v1/tokenizers/{name}/versions/{version}/encode"
    plain = checked(client, "POST", route, f"{VERSION}/encode", encode_with_version(store, row, TEXT),
                    json={"text": TEXT})
    assert "sampling" not in plain and {"ids", "tokens", "offsets"} <= set(plain)
    options = {"dropout": 0.5, "seed": 3}
    sampled = checked(client, "POST", route, f"{VERSION}/encode",
                      encode_with_version(store, row, TEXT, SamplingOptions(**options)),
                      json={"text": TEXT, "sampling": options})
    assert sampled["sampling"] == {"method": "bpe-dropout", **options}
    reference = checked(client, "POST", "/v1/references/{name}/encode", "/v1/references/gpt2/encode",
                        encode_with_reference("gpt2", TEXT), json={"text": TEXT})
    assert reference["tokenizer"] == "gpt2" and "sampling" not in reference


@pytest.mark.parametrize("mode", ["corpus", "version"])
def test_bpe_steps_are_typed_and_whole(client, measured, sessionmaker, store, mode):
    request = ({"corpus": "low lower newest widest", "steps": 5} if mode == "corpus" else
               {"tokenizer": NAME, "corpus_id": str(measured["corpora"][0].id), "steps": 5, "lines": 20})
    with sessionmaker() as session:
        run, about = compute(session, store, measured["team"], BpeStepsIn(**request), session.commit)
    expected = {**about, **run_json(run, replaying=mode == "version")}
    body = checked(client, "POST", "/v1/bpe/steps", "/v1/bpe/steps", expected, json=request)
    assert body["mode"] == mode and len(body["states"]) == 6
    assert ("rank" in body["states"][0]["next"]) == (mode == "version")


def test_healthz_is_typed(app_client):
    body = checked(app_client, "GET", "/healthz", "/healthz",
                   {"status": "ok", "checks": {"database": "ok", "broker": "ok", "store": "ok"}})
    assert set(body) == {"status", "checks"}


def test_the_job_spec_in_the_schema_is_the_training_spec_with_every_field_described(app_client):
    from tokenmill.training.spec import MAX_VOCAB, TrainingSpec

    spec = app_client.app.openapi()["components"]["schemas"]["JobIn"]["properties"]["spec"]
    assert set(spec["properties"]) == set(TrainingSpec.model_fields) and spec["additionalProperties"] is False
    assert all(field.get("description") for field in spec["properties"].values())
    vocab = spec["properties"]["vocab_size"]
    assert (vocab["minimum"], vocab["maximum"], vocab["default"]) == (1, MAX_VOCAB, 32000)
    mixture = next(option for option in spec["properties"]["mixture"]["anyOf"] if option.get("type") == "object")
    assert set(mixture["properties"]) == {"weights", "language_temperature", "max_repeats"}
    assert "$ref" not in str(spec)  # self-contained: a generated client needs nothing else
