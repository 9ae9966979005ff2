"""Throughput: per job type, the jobs that completed and failed over the last hour and the last day,
as bar charts drawn here in SVG (no chart library) from one grouped read of the job rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import falcon

from gatehouse.jobs import FinishedCount
from gatehouse_api.console.web import Console, Page
from gatehouse_api.resources.jobs import JobViews

BUCKET, HOUR = timedelta(minutes=5), timedelta(hours=1)  # the hour's bars, the day's
HOUR_BARS, DAY_BARS = 12, 24
# The drawing: viewBox units (the SVG scales to its box's width).
WIDTH, HEIGHT = 240, 40


@dataclass(frozen=True)
class Bar:
    """One bucket that had finished jobs, drawn: its rectangles' geometry as the SVG's attributes."""

    at: datetime  # where its bucket begins
    completed: int
    failed: int
    x: str
    width: str
    completed_y: str
    completed_height: str
    failed_y: str
    failed_height: str


@dataclass(frozen=True)
class Chart:
    """One type over one window: its bars (oldest first; empty buckets are not drawn) and totals."""

    type: str
    since: datetime
    bars: list[Bar]
    completed: int
    failed: int


def _bar(at: datetime, completed: int, failed: int, i: int, width: float, tallest: int) -> Bar:
    failed_h = HEIGHT * failed / tallest
    completed_h = HEIGHT * completed / tallest
    return Bar(
        at=at,
        completed=completed,
        failed=failed,
        x=f"{i * width:.2f}",
        width=f"{width * 0.85:.2f}",
        completed_y=f"{HEIGHT - failed_h - completed_h:.2f}",
        completed_height=f"{completed_h:.2f}",
        failed_y=f"{HEIGHT - failed_h:.2f}",
        failed_height=f"{failed_h:.2f}",
    )


def charts(counts: list[FinishedCount], start: datetime, step: timedelta, bars: int) -> list[Chart]:
    """Per type, ``bars`` bars of ``step`` from ``start`` (the counts' buckets summed into them), each
    bar's height scaled to the type's tallest; types with nothing in the window are left out."""
    per_type: dict[str, list[list[int]]] = {}
    for c in counts:
        i = (c.at - start) // step
        if 0 <= i < bars:
            cells = per_type.setdefault(c.type, [[0, 0] for _ in range(bars)])
            cells[i][0] += c.completed
            cells[i][1] += c.failed
    width = WIDTH / bars
    drawn = []
    for job_type, cells in sorted(per_type.items()):
        tallest = max(done + failed for done, failed in cells)
        drawn.append(
            Chart(
                type=job_type,
                since=start,
                bars=[
                    _bar(start + i * step, done, failed, i, width, tallest)
                    for i, (done, failed) in enumerate(cells)
                    if done or failed
                ],
                completed=sum(done for done, _ in cells),
                failed=sum(failed for _, failed in cells),
            )
        )
    return drawn


class Throughput(Page):
    """GET /console/throughput: jobs completed and failed per type, last hour (5-minute bars) and last
    day (hourly bars)."""

    def __init__(self, console: Console, jobs: JobViews) -> None:
        super().__init__(console)
        self.jobs = jobs

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = datetime.now(UTC)
        # Whole buckets: the last (partial) bar ends now; the day's hours are whole hours of UTC.
        hour_start = now.replace(minute=now.minute - now.minute % 5, second=0, microsecond=0) - BUCKET * (
            HOUR_BARS - 1
        )
        day_start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=DAY_BARS - 1)
        counts = self.jobs.finished_counts(
            day_start,
            coarse_s=int(HOUR.total_seconds()),
            fine_from=hour_start,
            fine_s=int(BUCKET.total_seconds()),
        )
        self.console.render(
            req,
            resp,
            "throughput.html",
            windows=[
                ("hour", "Last hour (5-minute bars)", charts(counts, hour_start, BUCKET, HOUR_BARS)),
                (
                    "day",
                    "Last day (hourly bars, UTC)",
                    charts(counts, day_start, HOUR, DAY_BARS),
                ),
            ],
            width=WIDTH,
            height=HEIGHT,
            stamp="%Y-%m-%d %H:%M UTC",
        )
