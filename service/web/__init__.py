"""The team dashboards: server-rendered pages at `/`, signed in with an API key (cookie session).

`router` holds every page and the few JSON endpoints the pages' script calls; `static_files`
serves the one stylesheet and the one script. Pages call the same core functions as /v1.
"""

from fastapi import APIRouter
from fastapi.staticfiles import StaticFiles

from service.web import bpe, corpora, fertility, jobs, notfound, signin, team, tokenizers, versions
from service.web.render import STATIC

router = APIRouter(include_in_schema=False)
# notfound last: its catch-all paths answer only what no page above does.
for module in (signin, fertility, versions, tokenizers, jobs, corpora, bpe, team, notfound):
    router.include_router(module.router)


def static_files() -> StaticFiles:
    return StaticFiles(directory=STATIC)
