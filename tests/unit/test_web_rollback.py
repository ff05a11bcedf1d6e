"""A dashboard route's error becomes a page inside the route, so the request's session never
sees it: WebRoute rolls the session back, in one place, before the page is answered."""

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.orm import sessionmaker
from sqlalchemy.pool import StaticPool

from service.deps import SessionDep
from service.web.render import WebRoute
from tokenmill.errors import InvalidInput


def _app():
    engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE notes (body TEXT)"))
    router = APIRouter(route_class=WebRoute)

    @router.post("/kept")
    def kept(session: SessionDep):
        session.execute(text("INSERT INTO notes VALUES ('kept')"))
        return {"ok": True}

    @router.post("/refused")
    def refused(session: SessionDep):
        session.execute(text("INSERT INTO notes VALUES ('half-written')"))
        raise InvalidInput("the second half is wrong", field="second")

    @router.post("/crashed")
    def crashed(session: SessionDep):
        session.execute(text("INSERT INTO notes VALUES ('crashed')"))
        raise RuntimeError("a bug")

    app = FastAPI()
    app.include_router(router)
    app.state.sessionmaker = sessionmaker(engine)
    return app, engine


def _notes(engine) -> list[str]:
    with engine.connect() as connection:
        return [row[0] for row in connection.execute(text("SELECT body FROM notes"))]


def test_an_error_page_leaves_nothing_written():
    app, engine = _app()
    client = TestClient(app, raise_server_exceptions=False)
    assert client.post("/kept").status_code == 200
    page = client.post("/refused")
    assert page.status_code == 422 and "the second half is wrong" in page.text
    assert client.post("/refused", headers={"accept": "application/json"}).json()["field"] == "second"
    assert client.post("/crashed").status_code == 500
    assert _notes(engine) == ["kept"]
