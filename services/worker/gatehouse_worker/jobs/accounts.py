"""account-verify: what WB says of an account's new token, its categories and its seller.

Written with the account or its new token (AccountHandlers). ``/ping`` on each category's host
answers 200 (granted) or 401 ``token scope not allowed`` (denied); any other 401 means the token
itself is bad, and the pipeline marks it (tokenInvalid) as it does for any job. WB allows /ping
3 times per 30 s per host and blocks it on a timer: it is called here and nowhere else.
"""

from __future__ import annotations

from typing import Any

from gatehouse.handlers import AccountHandlers
from gatehouse.job_types import ACCOUNT_VERIFY, ACCOUNTS_TOKEN_EXPIRY
from gatehouse.keys import sha256
from gatehouse.wb import client as wb
from gatehouse.wb.errors import WbScopeDenied
from gatehouse.wb.hosts import CATEGORIES
from gatehouse.wb.tokens import DENIED, GRANTED
from gatehouse_worker.runtime import JobContext, job

SELLER_FIELDS = ("name", "sid", "tin", "tradeMark")


@job(ACCOUNT_VERIFY)
def account_verify(ctx: JobContext, accounts: AccountHandlers) -> dict[str, Any]:
    # The token may change while this runs: then the new one is checked (its own job is this one:
    # one live account-verify per account), and what was learnt of the old one is dropped.
    for _ in range(3):
        client = ctx.wb()
        token = sha256(ctx.wb_token or "")[:16]  # the answers saved so far are this token's
        saved = ctx.checkpoint
        access = dict(saved.get("access", {})) if saved.get("token") == token else {}
        for category in CATEGORIES:
            if category not in access:
                access[category] = _ping(client, category)
                ctx.save_checkpoint({"token": token, "access": access})  # a 429 pause resumes here
        info = client.call(wb.SELLER_INFO) or {}
        seller = {field: info.get(field) for field in SELLER_FIELDS}
        if accounts.record_verification(ctx.job.account_id, ctx.wb_token, access, seller):
            return {"access": access, "seller": seller}
        ctx.save_checkpoint({})
    return {"superseded": True}  # replaced three times over while it ran: the next token's job checks


def _ping(client: wb.WbClient, category: str) -> str:
    try:
        client.call(wb.ping_of(category))
    except WbScopeDenied:
        return DENIED
    return GRANTED


@job(ACCOUNTS_TOKEN_EXPIRY)
def token_expiry(ctx: JobContext, accounts: AccountHandlers, token_expiry_warning_ms: int) -> dict[str, Any]:
    return {"announced": accounts.announce_expiring(within_ms=token_expiry_warning_ms)}
