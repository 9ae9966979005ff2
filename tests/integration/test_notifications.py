"""Notifications against real PostgreSQL: written with their e-mail job in the caller's transaction; list, mark read."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from gatehouse.errors import NotFound, ValidationFailed
from gatehouse.job_types import NOTIFICATION_EMAIL


def count(sql, table: str) -> int:
    return sql(f"SELECT count(*) FROM {table}")[0][0]


def queued(gh) -> set[str]:
    return gh.dispatcher.queued_job_ids({NOTIFICATION_EMAIL.queue})


@pytest.fixture
def user(gh):
    return gh.account_handlers.create_user("ala@example.com", "Ala")


def test_notify_writes_the_notification_and_its_email_job_in_the_callers_transaction(gh, sql, user):
    # When a domain change notifies its user in its own transaction
    with gh.uow.begin() as tx:
        tx.conn.execute(text("INSERT INTO attributes (code, label) VALUES ('color', 'Kolor')"))
        notification_id = gh.notifications.notify(
            tx,
            user_id=user.id,
            kind="catalog.bulk_operation.completed",
            title="Akcja masowa zakończona",
            body="Przetworzono 51, udało się 51, błędów 0.",
            link="/v1/admin/catalog/bulk-operations/1",
        )
        # the message of its e-mail job, recorded to be sent after the commit
        [message] = tx.messages

    # Then the change, the notification and a waiting e-mail job committed together
    assert count(sql, "attributes") == 1
    [(kind, title, read_at)] = sql(
        "SELECT kind, title, read_at FROM notifications WHERE id = :id", id=notification_id
    )
    assert (kind, title, read_at) == ("catalog.bulk_operation.completed", "Akcja masowa zakończona", None)
    job = gh.jobs.get(message.job_id)
    assert (job.type, job.queue, job.state, job.account_id) == (
        NOTIFICATION_EMAIL.name,
        NOTIFICATION_EMAIL.queue,
        "waiting",
        None,
    )
    assert job.max_attempts == NOTIFICATION_EMAIL.retry.attempts == 6
    assert job.payload == {"notificationId": str(notification_id)}
    # … and the message is what the job needs (row id, queue, actor, message number)
    assert (message.queue, message.actor, message.number) == (job.queue, job.type, job.message_number)


def test_a_rollback_leaves_neither_the_notification_nor_its_job(gh, sql, user):
    # When the caller's transaction fails after notifying
    with pytest.raises(RuntimeError), gh.uow.begin() as tx:
        gh.notifications.notify(tx, user_id=user.id, kind="k", title="t", body="b")
        raise RuntimeError("the domain change failed")

    # Then nothing of it is left, and nothing was sent
    assert count(sql, "notifications") == 0
    assert count(sql, "jobs") == 0
    assert queued(gh) == set()


def test_each_notification_gets_its_own_email_job(gh, sql, user):
    # Jobs without an account never collide on the one-live-job-per-(account, type) index.
    with gh.uow.begin() as tx:
        gh.notifications.notify(tx, user_id=user.id, kind="k", title="one", body="b")
        gh.notifications.notify(tx, user_id=user.id, kind="k", title="two", body="b")
        first, second = tx.messages
    assert first.job_id != second.job_id
    assert count(sql, "jobs") == 2


def test_an_unknown_user_or_a_blank_title_is_refused(gh, sql):
    with pytest.raises(Exception, match="foreign key"), gh.uow.begin() as tx:
        gh.notifications.notify(tx, user_id=uuid.uuid4(), kind="k", title="t", body="b")
    with pytest.raises(ValidationFailed) as err, gh.uow.begin() as tx:
        gh.notifications.notify(tx, user_id=uuid.uuid4(), kind="k", title="  ", body="b")
    assert err.value.field == "title"
    assert count(sql, "notifications") == count(sql, "jobs") == 0
    assert queued(gh) == set()


def test_the_email_message_is_enqueued_after_commit(gh, user):
    with gh.uow.begin() as tx:
        gh.notifications.notify(tx, user_id=user.id, kind="k", title="t", body="b")
        [message] = tx.messages
        assert queued(gh) == set()  # not before the commit
    assert queued(gh) == {str(message.job_id)}


def test_a_user_lists_their_notifications_newest_first_and_marks_one_read(gh, user):
    store = gh.notifications
    other = gh.account_handlers.create_user("ola@example.com", "Ola")
    ids = []
    for title in ("first", "second", "third"):
        with gh.uow.begin() as tx:
            ids.append(store.notify(tx, user_id=user.id, kind="k", title=title, body="b"))
    with gh.uow.begin() as tx:
        theirs = store.notify(tx, user_id=other.id, kind="k", title="theirs", body="b")

    # Then each user sees only their own, newest first
    assert [n.title for n in store.list_for_user(user.id)] == ["third", "second", "first"]
    assert [n.title for n in store.list_for_user(other.id)] == ["theirs"]
    assert [n.title for n in store.list_for_user(user.id, limit=1)] == ["third"]

    # When one is marked read, it keeps its first read time
    read = gh.notification_handlers.mark_read(user.id, ids[0])
    assert read.read_at is not None
    assert gh.notification_handlers.mark_read(user.id, ids[0]).read_at == read.read_at
    assert [n.read_at is not None for n in store.list_for_user(user.id)] == [False, False, True]

    # … and another user's notification is not found
    with pytest.raises(NotFound):
        gh.notification_handlers.mark_read(user.id, theirs)
    with pytest.raises(NotFound):
        gh.notification_handlers.mark_read(user.id, uuid.uuid4())
    assert store.list_for_user(other.id)[0].read_at is None


def test_the_email_job_finds_the_notification_and_its_users_address(gh, user):
    store = gh.notifications
    with gh.uow.begin() as tx:
        notification_id = store.notify(tx, user_id=user.id, kind="k", title="t", body="b", link="/x")
    of = store.email_of(notification_id)
    assert (of.email, of.name, of.notification.link) == ("ala@example.com", "Ala", "/x")
    assert store.email_of(uuid.uuid4()) is None
