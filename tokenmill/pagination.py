"""Pages of a list: `{"items": [...], "total": N, "page": P, "limit": L}`."""

from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

MAX_LIMIT = 200
Row = TypeVar("Row")


@dataclass(frozen=True)
class Page:
    page: int = 1
    limit: int = 50

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit


def page_count(total: int, per_page: int) -> int:
    """How many pages `total` rows fill (at least one, empty)."""
    return max(1, -(-total // per_page))


def paginate(session: Session, query: Select[Row], page: Page) -> tuple[list[Row], int]:
    """One page of the query's rows and the total count."""
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    rows = list(session.scalars(query.limit(page.limit).offset(page.offset)))
    return rows, total
