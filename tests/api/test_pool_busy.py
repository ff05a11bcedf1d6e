"""A busy connection pool is load, not an outage: 503 Busy with Retry-After 1, and /healthz stays 200."""

from fastapi.testclient import TestClient

from service.app import create_app


def test_a_pool_waited_for_is_busy_and_health_is_unaffected(settings, team_key):
    _, key = team_key
    tight = settings.model_copy(update={"api_database_pool_size": 1, "api_database_max_overflow": 0,
                                        "api_database_pool_timeout": 0.5})
    with TestClient(create_app(tight)) as client:
        held = client.app.state.sessionmaker().connection()  # the pool's one connection, taken
        try:
            answer = client.get("/v1/corpora", headers={"Authorization": f"Bearer {key}"})
            assert answer.status_code == 503, answer.text
            assert answer.json()["title"] == "Busy" and "database connection" in answer.json()["detail"]
            assert answer.headers["retry-after"] == "1"
            health = client.get("/healthz")
            assert health.status_code == 200 and health.json()["checks"]["database"] == "ok"
        finally:
            held.close()
        assert client.get("/v1/corpora", headers={"Authorization": f"Bearer {key}"}).status_code == 200
