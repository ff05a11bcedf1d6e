"""The team page: its quotas and what it uses of them (what GET /v1/team answers)."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from service.deps import SessionDep, team_quotas
from service.uploads import uploads_in_flight
from service.web.auth import WebSessionDep
from service.web.render import WebRoute, render
from tokenmill.quotas import QUOTA_NAMES, usage_of

router = APIRouter(route_class=WebRoute, include_in_schema=False)

# What each quota is called on the page, and which use it is held against.
LABELS = {"storage_bytes": "Stored corpora (decompressed)", "corpora": "Corpora",
          "queued_jobs": "Queued jobs (and, apart, queued evaluation runs)",
          "running_jobs": "Running jobs (and, apart, running evaluation runs)",
          "concurrent_uploads": "Uploads at once", "requests_per_minute": "Expensive requests a minute, per API key"}


@router.get("/team")
def team_page(request: Request, session: SessionDep, web: WebSessionDep) -> HTMLResponse:
    quotas, usage = team_quotas(request, web.team.id).as_dict(), usage_of(session, web.team.id).as_dict()
    usage["concurrent_uploads"] = uploads_in_flight(request, web.team.id)
    rows = [{"name": name, "label": LABELS[name], "limit": quotas[name], "used": usage.get(name),
             "also": usage.get(name.replace("jobs", "evaluations")) if name.endswith("_jobs") else None}
            for name in QUOTA_NAMES]
    return render(request, "team.html", web, rows=rows)
