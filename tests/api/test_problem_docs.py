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
