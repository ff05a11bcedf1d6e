"""The OpenAPI document names the errors each operation answers, as application/problem+json, and
the answers are what it says (service/problem_docs.py)."""

from service.problem_docs import Problem
from service.problems import MEDIA_TYPE

PROBLEM = {"$ref": "#/components/schemas/Problem"}


def operations(app_client):
    schema = app_client.get("/openapi.json").json()
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def declared(operation, status: int) -> bool:
    response = operation["responses"].get(str(status))
    return response is not None and response["content"] == {MEDIA_TYPE: {"schema": PROBLEM}}


def test_every_v1_operation_declares_its_errors_as_problems(app_client):
    seen = 0
    for path, method, operation in operations(app_client):
        if not path.startswith("/v1/"):
            continue
        seen += 1
        assert declared(operation, 401) and declared(operation, 503), (method, path)
        if "{" in path:
            assert declared(operation, 404), (method, path)
        if method in ("post", "put", "delete"):
            assert declared(operation, 409) and declared(operation, 413), (method, path)
        if "422" in operation["responses"]:  # never FastAPI's own application/json validation error
            assert declared(operation, 422), (method, path)
    assert seen > 20
    schemas = app_client.get("/openapi.json").json()["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and schemas["Problem"]["required"] == ["type", "title", "status", "detail"]


def test_the_rate_is_declared_where_it_is_spent_and_nowhere_else(app_client):
    paths = {(method, path): operation for path, method, operation in operations(app_client)}
    assert declared(paths["post", "/v1/bpe/steps"], 429)
    assert declared(paths["get", "/v1/tokenizers/{name}/versions/{version}/report"], 429)
    assert declared(paths["post", "/v1/jobs"], 429)
    assert not declared(paths["get", "/v1/corpora"], 429)
    assert not declared(paths["get", "/v1/jobs/{job_id}"], 429)


def test_answered_problems_are_the_declared_schema(app_client, team_key):
    _, key = team_key
    answers = [app_client.get("/v1/corpora"),  # no key: 401
               app_client.get("/v1/corpora/not-a-uuid", headers={"Authorization": f"Bearer {key}"}),  # 422
               app_client.get("/v1/jobs/00000000-0000-0000-0000-000000000000",
                              headers={"Authorization": f"Bearer {key}"})]  # 404
    assert [answer.status_code for answer in answers] == [401, 422, 404]
    for answer in answers:
        assert answer.headers["content-type"] == MEDIA_TYPE
        problem = Problem.model_validate(answer.json())
        assert problem.status == answer.status_code and problem.detail


def test_a_method_a_path_does_not_answer_is_a_405_naming_every_method_it_does(api):
    # /v1/corpora/duplicates is a resource of its own, not a corpus id; a corpus answers GET and DELETE.
    answer = api.delete("/v1/corpora/duplicates")
    assert answer.status_code == 405 and answer.headers["allow"] == "GET"
    answer = api.put("/v1/corpora/00000000-0000-0000-0000-000000000000")
    assert answer.status_code == 405 and answer.headers["allow"] == "DELETE, GET"
    assert answer.headers["content-type"] == MEDIA_TYPE
    assert api.get("/v1/corpora/not-a-uuid").status_code == 422  # still an id refused, naming it


def test_parameters_and_bodies_say_what_the_routes_take(app_client):
    paths = app_client.get("/openapi.json").json()["paths"]
    version = next(p for p in paths["/v1/tokenizers/{name}/versions/{version}"]["get"]["parameters"]
                   if p["name"] == "version")
    assert version["schema"]["anyOf"] == [{"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                                          {"type": "string", "enum": ["latest"]}]
    assert "400" in paths["/v1/jobs"]["post"]["responses"]  # a body that is not UTF-8 JSON
    assert "200" in paths["/v1/jobs"]["post"]["responses"]  # an Idempotency-Key replayed


def test_a_json_body_is_read_with_json_types(api):
    # pydantic alone would take 0 for false and "5" for 5; the document says boolean and integer.
    answer = api.post("/v1/bpe/steps", json={"end_of_word": 0})
    assert answer.status_code == 422 and answer.json()["field"] == "end_of_word"
    answer = api.post("/v1/references/gpt2/encode", json={"text": "a", "sampling": {"seed": "5"}})
    assert answer.status_code == 422 and answer.json()["field"] == "sampling.seed"
    assert api.post("/v1/references/gpt2/encode", json={"text": "a", "extra": 1}).status_code == 422
