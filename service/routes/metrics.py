"""GET /metrics: the Prometheus text (or OpenMetrics, when asked for) of service/metrics.py.

Mounted only when `TOKENMILL_METRICS_ENABLED`; with `TOKENMILL_METRICS_TOKEN` set (and not
empty) it answers only `Authorization: Bearer <token>`, compared in constant time, and 401
problem+json otherwise. Outside /v1: API keys are for tenants, this token for the operators' scraper.
"""

import hmac

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import choose_encoder

from service.middleware import bearer_key
from tokenmill.errors import Unauthorized

router = APIRouter(tags=["operations"])


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    token = request.app.state.settings.metrics_token
    expected = token.get_secret_value() if token is not None else ""
    if expected:
        given = bearer_key(request.headers.get("authorization")) or ""
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise Unauthorized("GET /metrics needs Authorization: Bearer <TOKENMILL_METRICS_TOKEN>")
    encode, media_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(request.app.state.metrics.registry), media_type=media_type)
