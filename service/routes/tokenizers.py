"""/v1/tokenizers: names, versions, metadata, files and bundles (service/downloads.py), the encode
playground and the cost report."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from service.deps import ExpensiveTeamDep, PageDep, SessionDep, StoreDep, TeamDep
from service.downloads import MEDIA_TYPES, bundle_response, file_response
from service.schemas import EncodeIn, EncodeOut, Listing, TokenizerOut, VersionOut
from service.schemas_evaluations import VersionEvaluationsOut
from service.schemas_report import CostReportOut
from tokenmill.evaluation.reports import version_curve, version_evaluations
from tokenmill.playground.cost_report import combine, measured_costs, probed_costs
from tokenmill.playground.encode import encode_with_version
from tokenmill.versions.registry import get_version, list_names, list_versions

router = APIRouter(prefix="/v1/tokenizers", tags=["tokenizers"])

BINARY = {"schema": {"type": "string", "format": "binary"}}
# What the downloads answer (service/downloads.py): a file's media type follows its suffix.
BUNDLE = {200: {"description": "every file of the version under a folder named for it",
                "content": {"application/gzip": BINARY}}}
FILE = {200: {"description": "one file of the version",
              "content": {media: BINARY for media in (*MEDIA_TYPES.values(), "application/octet-stream")}}}


@router.get("", response_model=Listing[TokenizerOut])
def read_names(session: SessionDep, team: TeamDep, page: PageDep):
    rows, total = list_names(session, team, page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


@router.get("/{name}/versions", response_model=Listing[VersionOut])
def read_versions(session: SessionDep, team: TeamDep, page: PageDep, name: str):
    rows, total = list_versions(session, team, name, page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


@router.get("/{name}/versions/{version}", response_model=VersionOut)
def read_version(session: SessionDep, team: TeamDep, name: str, version: str):
    return get_version(session, team, name, version)


@router.get("/{name}/versions/{version}/bundle.tar.gz", response_class=Response, responses=BUNDLE)
def download_bundle(session: SessionDep, store: StoreDep, team: TeamDep, name: str, version: str):
    return bundle_response(store, get_version(session, team, name, version))


@router.get("/{name}/versions/{version}/files/{filename}", response_class=Response, responses=FILE)
def download_file(session: SessionDep, store: StoreDep, team: TeamDep, name: str, version: str, filename: str):
    return file_response(store, get_version(session, team, name, version), filename)


@router.get("/{name}/versions/{version}/evaluations", response_model=VersionEvaluationsOut)
def read_evaluations(session: SessionDep, team: TeamDep, name: str, version: str):
    row = get_version(session, team, name, version)
    return {"name": row.name, "version": row.version, "items": version_evaluations(session, team, row),
            "vocab_curve": version_curve(session, team, row)}


@router.post("/{name}/versions/{version}/encode", response_model=EncodeOut)
def encode(request: Request, body: EncodeIn, session: SessionDep, store: StoreDep, team: ExpensiveTeamDep, name: str,
           version: str):
    row = get_version(session, team, name, version)
    session.commit()  # the encode may take its whole time limit: hold no database connection meanwhile
    return encode_with_version(store, row, body.text, body.sampling)


@router.get("/{name}/versions/{version}/report", response_model=CostReportOut)
def read_report(session: SessionDep, store: StoreDep, team: ExpensiveTeamDep, name: str, version: str):
    """What the version costs next to GPT-2, cl100k_base and o200k_base (tokenmill.playground.cost_report)."""
    row = get_version(session, team, name, version)
    measured = measured_costs(session, store, team, row)
    session.commit()  # the probes' sandbox encodes may take their time limit: hold no database connection meanwhile
    return combine(measured, probed_costs(store, row))
