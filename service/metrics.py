"""What operators scrape from GET /metrics: the API's own counters, and the work and sandbox state read at scrape.

Each app has a registry of its own (`Metrics.registry`), so several apps in one process
(the tests) never share a series. Label values are bounded: a route is its path template
(`UNMATCHED` when none matched), a method one of `METHODS` (else "OTHER"), a team one the
operator created. A raw path never becomes a label: one series per path would be an attack.

At scrape, `WorkCollector` reads the database in one short transaction: unfinished work per
team and kind (one grouped query per kind), and the durations of the work that finished in the
last `DURATION_WINDOW`, aggregated per bucket in SQL, so the scrape costs the same however
much ran. Those durations are a gauge histogram (a window, not a running total: a bucket can
go down). With the database away, the scrape still answers, and `tokenmill_metrics_database_up`
says 0. `SandboxCollector` reads the encode sandbox of this process, if one is running.

Deliberately not handled: several API processes behind one address (each has its own counters;
scrape each), and Prometheus' multiprocess mode.
"""

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from sqlalchemy import ColumnElement, extract, func, select, text
from sqlalchemy.orm import Session

from tokenmill.db import utcnow
from tokenmill.errors import OverQuota
from tokenmill.models import UNFINISHED, EvaluationRun, Status, Team, TrainingJob
from tokenmill.sandboxed import sandbox

log = logging.getLogger(__name__)

UNMATCHED = "unmatched"
UNKNOWN_TEAM = "unknown"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds: from a cached read to an upload of several minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# Seconds: from an evaluation of a small corpus to a training job at its 3 h limit.
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 10800, 21600)
DURATION_WINDOW = timedelta(hours=24)
KINDS: tuple[tuple[str, type[TrainingJob] | type[EvaluationRun]], ...] = (
    ("training_job", TrainingJob), ("evaluation_run", EvaluationRun))
TIMED = (Status.SUCCEEDED, Status.FAILED)  # a cancelled row's duration says nothing about the work
STATEMENT_TIMEOUT_MS = 2000  # a slow database slows the scrape this much at most (PostgreSQL)


class Metrics:
    """The API's metrics and the registry GET /metrics renders."""

    def __init__(self, state: Any) -> None:
        """`state` is the app's state: the collectors find its `sessionmaker` there once the app started."""
        # A `_created` series beside each counter and histogram doubles what is sent for what the text format
        # does not use. The switch is process-wide: this process's only registries are its apps'.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        self.registry = CollectorRegistry()
        self.requests = Counter("tokenmill_http_requests", "Requests answered, by route template, method and status",
                                ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("tokenmill_http_request_duration_seconds",
                                 "Time from a request's arrival to the end of its answer",
                                 ["route", "method", "status"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.refusals = Counter("tokenmill_quota_refusals", "Requests refused at a team's quota (409) or rate (429)",
                                ["quota", "status"], registry=self.registry)
        self.upload_bytes = Counter("tokenmill_upload_bytes", "Bytes of upload bodies received, as they arrive",
                                    ["route", "team"], registry=self.registry)
        self.registry.register(WorkCollector(state))
        self.registry.register(SandboxCollector())
        self.registry.register(AdmissionCollector(state))
        # One (counter, histogram) pair per label set, looked up once: this runs on every request.
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method if method in METHODS else "OTHER", status)
        children = self._children.get(key)
        if children is None:
            labels = (key[0], key[1], str(status))
            children = self._children[key] = (self.requests.labels(*labels), self.latency.labels(*labels))
        children[0].inc()
        children[1].observe(seconds)

    def count_refusal(self, exc: OverQuota) -> None:
        self.refusals.labels(exc.quota, str(exc.status)).inc()


class WorkCollector(Collector):
    """Queued and running work per team and kind, and recent durations, read from the database at scrape."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("tokenmill_metrics_database_up",
                               "1 when this scrape read the work from the database, 0 when that failed")
        factory = getattr(self.state, "sessionmaker", None)
        try:
            if factory is None:
                raise RuntimeError("the app has not started")
            with factory() as session, session.begin():
                families = _work_families(session, utcnow())
        except Exception as exc:  # any failure: the scrape answers the other metrics and says this one failed
            log.warning("metrics: the database read failed: %s: %s", type(exc).__name__, exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families


def _work_families(session: Session, now: datetime) -> list[Metric]:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}"))
    queued = GaugeMetricFamily("tokenmill_work_queued", "Training jobs and evaluation runs waiting for a worker",
                               labels=["team", "kind"])
    running = GaugeMetricFamily("tokenmill_work_running", "Training jobs and evaluation runs a worker is running",
                                labels=["team", "kind"])
    durations = GaugeHistogramMetricFamily(
        "tokenmill_work_duration_seconds",
        f"Run time (finished_at - started_at) of the work that succeeded or failed in the last "
        f"{DURATION_WINDOW.total_seconds() / 3600:g} h", labels=["kind", "status"])
    for kind, model in KINDS:
        for team, waiting, working in _unfinished(session, model):
            queued.add_metric([team, kind], waiting)
            running.add_metric([team, kind], working)
        finished = _durations(session, model, now - DURATION_WINDOW)
        for status in TIMED:
            counts, total, seconds = finished.get(status.value, ([0] * len(DURATION_BUCKETS), 0, 0.0))
            # floatToGoString is unannotated in prometheus_client: it formats a bound as the text format does ("5.0").
            buckets = [(floatToGoString(bound), count)  # type: ignore[no-untyped-call]
                       for bound, count in zip(DURATION_BUCKETS, counts)]
            durations.add_metric([kind, status.value], [*buckets, ("+Inf", total)], seconds)
    return [queued, running, durations]


def _unfinished(session: Session, model: type[TrainingJob] | type[EvaluationRun]) -> list[tuple[str, int, int]]:
    """(team name, queued, running) for every team, zeros included, so a drained queue reads 0 rather than vanishing."""
    rows = session.execute(
        select(Team.name,
               func.count(model.id).filter(model.status == Status.QUEUED.value),
               func.count(model.id).filter(model.status == Status.RUNNING.value))
        .select_from(Team)
        .outerjoin(model, (model.team_id == Team.id) & model.status.in_([s.value for s in UNFINISHED]))
        .group_by(Team.name))
    return [(name, queued, running) for name, queued, running in rows]


def _durations(session: Session, model: type[TrainingJob] | type[EvaluationRun],
               since: datetime) -> dict[str, tuple[list[int], int, float]]:
    """Per status: how many finished within each bucket's bound (cumulative), how many in all, their seconds."""
    seconds = _seconds_between(session, model.started_at, model.finished_at)
    rows = session.execute(
        select(model.status, func.count(), func.coalesce(func.sum(seconds), 0.0),
               *(func.count().filter(seconds <= bound) for bound in DURATION_BUCKETS))
        .where(model.status.in_([s.value for s in TIMED]), model.finished_at >= since,
               model.started_at.is_not(None))
        .group_by(model.status))
    return {status: (list(counts), total, float(sum_seconds)) for status, total, sum_seconds, *counts in rows}


def _seconds_between(session: Session, start: Any, end: Any) -> ColumnElement[float]:
    if session.get_bind().dialect.name == "postgresql":
        # SQLAlchemy types EXTRACT as an integer; the epoch of an interval is fractional seconds.
        return cast(ColumnElement[float], extract("epoch", end - start))
    return (func.julianday(end) - func.julianday(start)) * 86400.0  # SQLite: days as a real number


class AdmissionCollector(Collector):
    """The requests inside this API process and those waiting their turn (service/admission.py)."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        turns = getattr(self.state, "turns", None)
        if turns is None:
            return
        yield GaugeMetricFamily("tokenmill_api_requests_inside", "Requests inside the app (at most the slots)",
                                value=turns.slots - turns.free)
        yield GaugeMetricFamily("tokenmill_api_requests_waiting", "Requests waiting for their caller's turn",
                                value=turns.waiting_count())
        yield CounterMetricFamily("tokenmill_api_requests_admitted", "Requests let into the app",
                                  value=turns.admitted_total)
        yield CounterMetricFamily("tokenmill_api_admission_wait_seconds", "Time requests spent waiting for a turn",
                                  value=turns.wait_seconds_total)
        yield CounterMetricFamily("tokenmill_api_requests_turned_away",
                                  "Requests answered 503 Busy: too many of their caller's waiting, or waited too long",
                                  value=turns.turned_away_total)


class SandboxCollector(Collector):
    """The encode sandbox's processes and its totals, when this process runs one (a scrape never starts it)."""

    def collect(self) -> Iterator[Metric]:
        # The running pool or None; `sandbox.current()` would start one.
        pool = sandbox.running()
        if pool is None:
            return
        stats = pool.stats()
        yield GaugeMetricFamily("tokenmill_sandbox_size", "Most encode processes the sandbox runs at once",
                                value=stats["size"])
        processes = GaugeMetricFamily("tokenmill_sandbox_processes", "Encode processes started, busy or idle",
                                      labels=["state"])
        processes.add_metric(["busy"], stats["busy"])
        processes.add_metric(["idle"], stats["idle"])
        yield processes
        yield CounterMetricFamily("tokenmill_sandbox_checkouts", "Encodes and probes that got a process",
                                  value=stats["checkouts_total"])
        yield CounterMetricFamily("tokenmill_sandbox_wait_seconds", "Time requests spent waiting for a free process",
                                  value=stats["wait_seconds_total"])
        yield CounterMetricFamily("tokenmill_sandbox_busy_refusals", "Requests refused (503) with every process busy",
                                  value=stats["busy_refusals_total"])
