"""A notification's e-mail: its link is absolute (PUBLIC_URL + the console path), the rest as written."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from gatehouse.notifications import EmailOf, NotificationRecord
from gatehouse_worker.jobs.notifications import message

OP = uuid.UUID("0d9c3b7e-5f7a-4c1e-9a51-3f6f0b1f2a10")


def of(link: str | None) -> EmailOf:
    n = NotificationRecord(
        uuid.uuid4(), uuid.uuid4(), "catalog.bulk_operation.completed", "Operacja masowa zakończona",
        "Produkty: 51, zmienione: 50, błędy: 1.", link, datetime.now(UTC), None,
    )  # fmt: skip
    return EmailOf(n, "ala@example.com", "Ala")


@pytest.mark.parametrize("public_url", ["https://ops.example.com/gh", "https://ops.example.com/gh/"])
def test_the_link_of_the_email_is_the_console_page_under_public_url(public_url):
    msg = message(of(f"/console/bulk-operations/{OP}"), "Gatehouse <noreply@gh.test>", public_url)

    lines = msg.get_content().splitlines()
    assert lines == [
        "Produkty: 51, zmienione: 50, błędy: 1.", "", f"https://ops.example.com/gh/console/bulk-operations/{OP}",
    ]  # fmt: skip


def test_a_full_url_stays_as_it_is_and_no_link_adds_no_line():
    msg = message(of("https://elsewhere.example/x"), "g@gh.test", "http://127.0.0.1:8000")
    assert msg.get_content().splitlines()[-1] == "https://elsewhere.example/x"
    assert message(of(None), "g@gh.test", "http://127.0.0.1:8000").get_content() == (
        "Produkty: 51, zmienione: 50, błędy: 1.\n"
    )
