"""Seller accounts and their API keys."""

from __future__ import annotations

import uuid

import falcon

from gatehouse.accounts import AccountChange
from gatehouse.accounts import Accounts as AccountStore
from gatehouse.errors import ValidationFailed
from gatehouse.freshness import DatasetFreshness, FreshnessStore
from gatehouse.handlers import AccountHandlers
from gatehouse.keys import KeyRecord
from gatehouse.models import Account as AccountModel
from gatehouse.pauses import Holds
from gatehouse.wb import tokens
from gatehouse_api.auth import principal, require_account, require_admin
from gatehouse_api.body import read_json
from gatehouse_api.openapi import contract
from gatehouse_api.schemas import (
    AccountCreated,
    AccountView,
    CreateAccount,
    FreshnessSlo,
    IssueKey,
    KeyCreated,
    KeyList,
    KeyView,
    PatchAccount,
)
from gatehouse_api.schemas import AccountFreshness as AccountFreshnessView
from gatehouse_api.schemas import DatasetFreshness as DatasetView


def key_list(keys: list[KeyRecord]) -> dict:
    """The answer of a keys list (account or staff user): what a key is, never its secret."""
    return KeyList(
        items=[
            KeyView(keyId=k.id, createdAt=k.created_at, lastUsedAt=k.last_used_at, expiresAt=k.expires_at)
            for k in keys
        ]
    ).model_dump(mode="json")


def account_view(account: AccountModel, holds: Holds) -> dict:
    """An account as the API shows it: never its token."""
    return AccountView(
        accountId=account.id,
        name=account.name,
        active=account.active,
        tokenInvalid=account.token_invalid,
        access=tokens.access_view(account.token_access),
        seller=account.seller,
        tokenExpiresAt=account.token_expires_at,
        createdAt=account.created_at,
        paused=holds.account_pause(account.id) is not None,
    ).model_dump(mode="json")


class Accounts:
    def __init__(self, handlers: AccountHandlers, *, max_body_bytes: int) -> None:
        self.handlers, self.max_body_bytes = handlers, max_body_bytes

    @contract(
        "Create a seller account (admin)",
        (201, AccountCreated, "created; the WB token is stored encrypted and never returned"),
        (400, 401, 403, 413, 415, 422),
        notes={422: "a field breaks a rule: e.g. wbToken a JWT whose exp has passed"},
        body=(CreateAccount, True),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req)
        body = read_json(req, CreateAccount, max_bytes=self.max_body_bytes)
        account = self.handlers.create_account(body.name, body.wbToken)
        resp.status = 201
        resp.location = f"/v1/accounts/{account.id}"
        resp.media = AccountCreated(accountId=account.id, name=account.name).model_dump(mode="json")


class Account:
    def __init__(
        self, handlers: AccountHandlers, accounts: AccountStore, holds: Holds, *, max_body_bytes: int
    ) -> None:
        self.handlers, self.accounts, self.holds = handlers, accounts, holds
        self.max_body_bytes = max_body_bytes

    @contract("Read an account", (200, AccountView, "the account"), (401, 404))
    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        resp.media = account_view(self.accounts.get(account_id), self.holds)

    @contract(
        "Change an account (admin): rename it, rotate its WB token, switch it off or on; audited",
        (200, AccountView, "the account as changed"),
        (400, 401, 403, 404, 413, 415, 422),
        notes={422: "a field breaks a rule (wbToken already expired), an unknown field, or no field at all"},
        body=(PatchAccount, True),
    )
    def on_patch(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        body = read_json(req, PatchAccount, max_bytes=self.max_body_bytes)
        if not body.model_fields_set:
            raise ValidationFailed("give at least one of name, wbToken, active")
        change = AccountChange(name=body.name, wb_token=body.wbToken, active=body.active)
        account = self.handlers.update_account(account_id, change, actor=principal(req).actor)
        resp.media = account_view(account, self.holds)


class AccountKeys:
    def __init__(self, handlers: AccountHandlers, accounts: AccountStore, *, max_body_bytes: int) -> None:
        self.handlers, self.accounts, self.max_body_bytes = handlers, accounts, max_body_bytes

    @contract(
        "Issue an account-scoped API key (admin)",
        (201, KeyCreated, "the key, shown once"),
        (400, 401, 403, 404, 413, 415, 422),
        body=(IssueKey, False),
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        body = read_json(req, IssueKey, max_bytes=self.max_body_bytes, allow_empty=True)
        key = self.handlers.issue_account_key(
            account_id, expires_at=body.expiresAt, actor=principal(req).actor
        )
        resp.status = 201
        resp.media = KeyCreated(key=key).model_dump(mode="json")

    @contract(
        "List an account's API keys (admin)", (200, KeyList, "its keys, never a secret"), (401, 403, 404)
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_admin(req)
        resp.media = key_list(self.accounts.keys(account_id))


class AccountKey:
    def __init__(self, handlers: AccountHandlers) -> None:
        self.handlers = handlers

    @contract(
        "Revoke an account's API key (admin): it answers 401 from the next request on",
        (204, None, "revoked"),
        (401, 403, 404),
    )
    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID, key_id: str
    ) -> None:
        require_admin(req)
        self.handlers.revoke_account_key(account_id, key_id, actor=principal(req).actor)
        resp.status = 204


def freshness_view(datasets: list[DatasetFreshness]) -> dict:
    """An account's datasets as GET /v1/accounts/{id}/freshness and the console's account page show them."""
    return AccountFreshnessView(
        datasets=[
            DatasetView(
                dataset=d.dataset,
                lastSyncedAt=d.last_synced_at,
                lastJobId=d.last_job_id,
                ageSeconds=d.age_seconds,
                slo=FreshnessSlo(maxAgeSeconds=d.max_age_seconds),
                stale=d.stale,
            )
            for d in datasets
        ]
    ).model_dump(mode="json")


class AccountFreshness:
    def __init__(self, freshness: FreshnessStore) -> None:
        self.freshness = freshness

    @contract(
        "When each WB dataset of an account was last brought up to date, against its SLO",
        (200, AccountFreshnessView, "every dataset"),
        (401, 404),
    )
    def on_get(self, req: falcon.Request, resp: falcon.Response, account_id: uuid.UUID) -> None:
        require_account(req, account_id)
        resp.media = freshness_view(self.freshness.of_account(account_id))
