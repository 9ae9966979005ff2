"""Notification e-mails end to end: real worker processes, a real SMTP server (aiosmtpd), real PostgreSQL and Redis.

And the /v1/me routes through a real API.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from gatehouse.job_types import NOTIFICATION_EMAIL
from gatehouse.jobs import JobMessage
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import free_port, wait_until
from tests.support.smtp import SmtpServer

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"
QUEUE = NOTIFICATION_EMAIL.queue


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer(free_port())  # not listening until the test starts it
    yield server
    server.stop()


def worker(processes, smtp: SmtpServer, **env: str) -> None:
    processes.start(
        "worker",
        "gatehouse-worker",
        "--processes",
        "1",
        "--threads",
        "2",
        env={
            "SMTP_URL": smtp.url,
            "SMTP_TIMEOUT_MS": "2000",
            "MAIL_FROM": "Gatehouse <noreply@gh.test>",
            **env,
        },
    )


@dataclass(frozen=True)
class Notified:
    notification_id: uuid.UUID
    message: JobMessage  # its e-mail job's message, sent after the commit


def notify_now(gh, user_id: uuid.UUID, title: str = "Akcja masowa zakończona") -> Notified:
    with gh.uow.begin() as tx:
        notification_id = gh.notifications.notify(
            tx,
            user_id=user_id,
            kind="catalog.bulk_operation.completed",
            title=title,
            body="Przetworzono: 51, udane: 50, błędy: 1.",
            link="/console/bulk-operations/op-1",
        )
        [message] = tx.messages
    return Notified(notification_id, message)


def finished(gh, job_id: uuid.UUID):
    job = gh.jobs.get(job_id)
    return job if job.state in ("completed", "failed") else None


def test_a_notifications_email_is_received_exactly_once(gh, processes, smtp):
    # Given a staff user, a worker (operators reach the console at PUBLIC_URL) and a running SMTP server
    smtp.start()
    user = gh.account_handlers.create_user("ala@example.com", "Ala Kowalska")
    worker(processes, smtp, PUBLIC_URL="https://ops.gh.test/gatehouse/")

    # When a notification is written and its message sent after commit
    notified = notify_now(gh, user.id)

    # Then its e-mail arrives: plain text, to the user, from MAIL_FROM, with the body and the link,
    # absolute: the console page under PUBLIC_URL
    wait_until(lambda: smtp.inbox.messages, timeout=30, what="the e-mail")
    job = wait_until(lambda: finished(gh, notified.message.job_id), timeout=15, what="the e-mail job")
    assert job.state == "completed" and job.attempt == 1, job
    [(rcpt, msg)] = smtp.inbox.messages
    assert rcpt == ["ala@example.com"]
    assert msg["From"] == "Gatehouse <noreply@gh.test>"
    assert msg["To"].addresses[0].addr_spec == "ala@example.com"
    assert msg["Subject"] == "Akcja masowa zakończona"
    assert msg.get_content_type() == "text/plain"
    content = msg.get_content()
    assert "Przetworzono: 51, udane: 50, błędy: 1." in content
    assert content.splitlines()[-1] == "https://ops.gh.test/gatehouse/console/bulk-operations/op-1"
    assert msg["Message-ID"] == f"<{notified.notification_id}@gatehouse>"

    # When its message is delivered again and reconciliation runs
    gh.dispatcher.send(notified.message)
    gh.job_handlers.reconcile(grace_ms=0)
    wait_until(
        lambda: not gh.dispatcher.queued_job_ids({QUEUE}), timeout=15, what="the duplicate to be consumed"
    )

    # Then no second e-mail is sent
    assert len(smtp.inbox.messages) == 1


def test_smtp_down_the_email_retries_and_is_delivered_once_the_server_is_up(gh, processes, smtp):
    # Given a worker pointed at a port where nothing listens (a wider retry ladder than FAST:
    # 300 ms, 0.6, 1.2, 2.4, 4.8 s, so the test has time to bring the server up)
    user = gh.account_handlers.create_user("ala@example.com", "Ala")
    worker(processes, smtp, RETRY_DELAY_SCALE=str(300 / 30_000))

    # When a notification is written
    notified = notify_now(gh, user.id)

    # Then its e-mail job fails its first attempt and waits for the next one
    def retrying():
        job = gh.jobs.get(notified.message.job_id)
        return job if job.state == "delayed" and job.attempt >= 2 else None

    job = wait_until(retrying, timeout=30, what="the e-mail job to retry")
    assert job.progress["phase"] == "retrying", job.progress
    assert job.error["code"] in ("ConnectionRefusedError", "SMTPConnectError", "OSError"), job.error
    assert not smtp.inbox.messages

    # When the SMTP server comes up on that port
    smtp.start()

    # Then the e-mail is delivered, once, and the job completes after more than one attempt
    wait_until(lambda: smtp.inbox.messages, timeout=30, what="the e-mail after the server came up")
    job = wait_until(lambda: finished(gh, notified.message.job_id), timeout=15, what="the e-mail job")
    assert job.state == "completed" and job.attempt >= 2, job
    wait_until(lambda: not gh.dispatcher.queued_job_ids({QUEUE}), timeout=15, what="the queue to drain")
    assert len(smtp.inbox.messages) == 1


def assert_problem(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["code"] == code


def test_me_notifications_through_the_api(gh, processes):
    # Given a real API, two staff users with keys, and an account key
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    api = httpx.Client(base_url=url, timeout=30)

    def staff(email: str) -> tuple[uuid.UUID, dict[str, str]]:
        created = api.post("/v1/admin/users", json={"email": email, "name": "N"}, headers=ADMIN)
        assert created.status_code == 201, created.text
        user_id = uuid.UUID(created.json()["userId"])
        key = api.post(f"/v1/admin/users/{user_id}/keys", headers=ADMIN).json()["key"]
        return user_id, {"Authorization": f"Bearer {key}"}

    ala, ala_key = staff("ala@example.com")
    ola, ola_key = staff("ola@example.com")
    account = api.post("/v1/accounts", json={"name": "Shop", "wbToken": "t"}, headers=ADMIN).json()
    seller = {
        "Authorization": "Bearer "
        + api.post(f"/v1/accounts/{account['accountId']}/keys", headers=ADMIN).json()["key"]
    }
    first = notify_now(gh, ala, title="first").notification_id
    second = notify_now(gh, ala, title="second").notification_id
    theirs = notify_now(gh, ola, title="theirs").notification_id

    # Then a user sees their own notifications, newest first
    listed = api.get("/v1/me/notifications", headers=ala_key)
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert [i["notificationId"] for i in items] == [str(second), str(first)]
    assert set(items[0]) == {"notificationId", "kind", "title", "body", "link", "createdAt", "readAt"}
    assert items[0]["kind"] == "catalog.bulk_operation.completed" and items[0]["readAt"] is None
    assert items[0]["link"] == "/console/bulk-operations/op-1"  # in-app: the path as written

    # When they mark one read
    read = api.post(f"/v1/me/notifications/{first}/read", headers=ala_key)
    assert read.status_code == 200, read.text
    assert read.json()["notificationId"] == str(first) and read.json()["readAt"] is not None
    items = api.get("/v1/me/notifications", headers=ala_key).json()["items"]
    assert [i["readAt"] is not None for i in items] == [False, True]

    # … another user's notification (or none) is not found, and stays unread
    assert_problem(api.post(f"/v1/me/notifications/{theirs}/read", headers=ala_key), 404, "NOT_FOUND")
    assert_problem(api.post(f"/v1/me/notifications/{uuid.uuid4()}/read", headers=ala_key), 404, "NOT_FOUND")
    [only] = api.get("/v1/me/notifications", headers=ola_key).json()["items"]
    assert only["notificationId"] == str(theirs) and only["readAt"] is None

    # … and only a user key has a "me": the admin token and account keys are forbidden, no token unauthorized
    for headers in (ADMIN, seller):
        assert_problem(api.get("/v1/me/notifications", headers=headers), 403, "FORBIDDEN")
        assert_problem(api.post(f"/v1/me/notifications/{first}/read", headers=headers), 403, "FORBIDDEN")
    assert_problem(api.get("/v1/me/notifications"), 401, "UNAUTHORIZED")
    api.close()
