"""Keys in the browser: revoke a staff user's key after its confirm step; the key stops working at once."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect


def test_revoke_a_staff_key_after_confirming(console, gh):
    user = gh.account_handlers.create_user("ops@example.com", "Ops")
    kept = gh.account_handlers.issue_user_key(user.id, actor="admin")
    doomed = gh.account_handlers.issue_user_key(user.id, actor="admin")
    doomed_id, kept_id = doomed.split("_")[1], kept.split("_")[1]
    bearer = {"Authorization": f"Bearer {doomed}"}
    assert httpx.get(f"{console.url}/v1/admin/jobs", headers=bearer).status_code == 200

    page = console.open("/console/users")
    section = page.locator(f"[data-user='{user.id}']")
    expect(section).to_contain_text("ops@example.com")
    section.locator(f"tr[data-key='{doomed_id}']").get_by_role("link", name="Revoke…").click()

    # The confirm step: what will happen, and a way back that changes nothing
    expect(page.get_by_role("heading", name=f"Revoke staff key {doomed_id}?")).to_be_visible()
    assert console.axe() == []
    page.get_by_role("link", name="Back").click()
    expect(page.locator(f"tr[data-key='{doomed_id}']")).to_have_count(1)
    assert httpx.get(f"{console.url}/v1/admin/jobs", headers=bearer).status_code == 200

    page.locator(f"tr[data-key='{doomed_id}']").get_by_role("link", name="Revoke…").click()
    page.get_by_role("button", name="Revoke the key").click()
    expect(page).to_have_url(f"{console.url}/console/users")
    expect(page.locator(f"tr[data-key='{doomed_id}']")).to_have_count(0)
    expect(page.locator(f"tr[data-key='{kept_id}']")).to_have_count(1)
    console.shot("users")
    assert httpx.get(f"{console.url}/v1/admin/jobs", headers=bearer).status_code == 401
