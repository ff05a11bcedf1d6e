"""The dashboard's own 404 page for any path under its sections that no page answers.

Registered last: /jobs/…, /tokenizers/… and /corpora/… paths that no route above matched get
the dashboard's page (signed in, with its header), never the API's problem+json; the page's
script, asking for JSON, still gets problem+json. Ids a page does not know (another team's
job, a version that is not there) are 404 pages of their own routes (WebRoute).
"""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from service.web.auth import WebSessionDep
from service.web.render import WebRoute, not_found

router = APIRouter(route_class=WebRoute, include_in_schema=False)


@router.get("/jobs/{rest:path}")
@router.get("/tokenizers/{rest:path}")
@router.get("/corpora/{rest:path}")
def nothing_here(request: Request, web: WebSessionDep, rest: str) -> Response:
    return not_found(request, web)
