"""Schemathesis hooks of tests/e2e/test_openapi_fuzz.py (loaded with SCHEMATHESIS_HOOKS).

- A webhook endpoint's URL is checked by resolving its host (the SSRF rules). A
  made-up host name would send a DNS query off this machine, so a generated URL
  whose host is a name becomes the loopback receiver's (allowlisted in the test);
  a URL our checks refuse before any lookup is sent as generated, one they
  would accept (a public IP literal) becomes the receiver's too. Positive cases always get the receiver's URL, so endpoints do get
  created and the routes under them are reached.
- Switching a module off would turn every later request to its routes into
  MODULE_DISABLED, starving the rest of the run: PUT /v1/admin/modules/{name}
  is sent with what was generated, except that a module is never switched off.
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis

from gatehouse.webhooks.safety import Allowlist, UrlRefused, check_url

LOOPBACK_URL = "http://127.0.0.1:9/hook"


class _WouldResolve(Exception):
    pass


def _tripwire(host: str, port: int) -> list[str]:
    raise _WouldResolve(host)


def no_lookup(url: str) -> str:
    """The URL if the API refuses it before any lookup; otherwise the loopback receiver's."""
    try:
        check_url(url, Allowlist.parse([]), resolve=_tripwire)
    except _WouldResolve:
        return LOOPBACK_URL
    except (UrlRefused, ValueError, TypeError):
        return url  # refused before any lookup: sent as generated
    # Accepted as it is (a public IP literal): no worker runs here to deliver to it, but an
    # endpoint naming an address off this machine is not left behind either.
    return LOOPBACK_URL


def _mode(case) -> str | None:
    """positive or negative: how schemathesis generated the case (None if it does not say)."""
    meta = getattr(case, "_meta", None)
    mode = getattr(getattr(meta, "generation", None), "mode", None)
    return getattr(mode, "value", mode)


@schemathesis.hook
def before_call(context, case, kwargs: dict[str, Any]) -> None:
    body = case.body
    if not isinstance(body, dict):
        return
    path = case.operation.path
    # The admin's endpoints and an account's (/v1/accounts/{accountId}/webhooks/endpoints…)
    if "/webhooks/endpoints" in path and isinstance(body.get("url"), str):
        # A valid-by-schema URL is almost never one we accept (any string is valid by the schema):
        # positive cases get the receiver's, so endpoints are created and their routes reached.
        body["url"] = LOOPBACK_URL if _mode(case) == "positive" else no_lookup(body["url"])
        # The test reads this to know the hooks were loaded and saw the webhook operations.
        with open(os.environ["GATEHOUSE_FUZZ_HOOK_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{case.operation.method.upper()} {body['url'][:80]!r}\n")
    if path.startswith("/v1/admin/modules/"):
        for field in ("enabled", "installed"):
            if body.get(field) is False:
                body[field] = True
