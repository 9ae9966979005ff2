"""Key rotation end to end: gatehouse-rotate-keys against the test database, with secrets written
under an old key (gatehouse.rotation): the complete run as the real console script in its own
process, the others (each a process start's second or two saved) through its ``main`` here."""

from __future__ import annotations

import re
import subprocess

import pytest

from gatehouse.crypto import TokenCipher, generate_key
from gatehouse_worker.commands import rotate_keys as rotate_keys_command
from tests.conftest import TOKEN_KEY
from tests.support.processes import BIN, REPO

CLI = str(BIN / "gatehouse-rotate-keys")
NEW = generate_key()
STORED = (
    "SELECT 'accounts', id, wb_token_encrypted, wb_token_key_id, NULL, NULL FROM accounts UNION ALL "
    "SELECT 'webhook_endpoints', id, secret, secret_key_id, previous_secret, previous_secret_key_id "
    "FROM webhook_endpoints ORDER BY 1, 2"
)


KEYS = {"TOKEN_ENCRYPTION_KEY": f"{NEW},{TOKEN_KEY}"}  # the new key first: it encrypts


@pytest.fixture
def rotate_keys(process_env, monkeypatch, capsys):
    """``main(args)`` here, in this process's environment set as the command's: (exit code, stdout)."""
    for name, value in {**process_env, **KEYS}.items():
        monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str]:
        code = rotate_keys_command.main(list(args))
        return code, capsys.readouterr().out

    return run


def left(stdout: str) -> dict[str, int]:
    return {t: int(n) for t, n in re.findall(r"^(\w+): (\d+) row\(s\) still under an old key$", stdout, re.M)}


def test_every_secret_is_reencrypted_in_batches_resumably_then_the_old_key_can_go(
    process_env, rotate_keys, gh, sql
):
    # Given three accounts and two webhook endpoints (one with a rotated secret in its grace
    # period) written under the old key, one account from before key ids were kept
    tokens = {
        gh.account_handlers.create_account(f"a{i}", f"wb-token-{i}").id: f"wb-token-{i}" for i in range(3)
    }
    sql("UPDATE accounts SET wb_token_key_id = NULL WHERE id = :id", id=next(iter(tokens)))
    made = [gh.webhook_handlers.create_endpoint(f"https://93.184.216.34/{i}", event_types=None, description="")
            for i in range(2)]  # fmt: skip
    secrets = {m.endpoint.id: [m.secret] for m in made}
    new_secret, _ = gh.webhook_handlers.rotate_secret(made[0].endpoint.id)
    secrets[made[0].endpoint.id].insert(0, new_secret)

    # When the dry run counts, nothing changes
    code, out = rotate_keys("--dry-run")
    assert code == 0 and left(out) == {"accounts": 3, "webhook_endpoints": 2}, out

    # When a run is stopped after two batches of one row, it says what is left and exits 1
    code, out = rotate_keys("--batch-size", "1", "--max-batches", "2")
    assert code == 1 and left(out) == {"accounts": 1, "webhook_endpoints": 2}, out

    # Then the next run, the console script, takes up only the rest
    done = subprocess.run(
        [CLI, "--batch-size", "2"], env={**process_env, **KEYS}, capture_output=True, text=True, timeout=120, cwd=REPO
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "accounts: re-encrypted 1 row(s)" in done.stdout
    assert "webhook_endpoints: re-encrypted 2 row(s)" in done.stdout
    assert left(done.stdout) == {"accounts": 0, "webhook_endpoints": 0}

    # And every secret now decrypts with the new key alone
    new_only = TokenCipher(gh.settings.model_copy(update={"token_encryption_key": NEW}))
    stored = sql(STORED)
    for table, row_id, value, _, previous, _ in stored:
        if table == "accounts":
            assert new_only.decrypt(value) == tokens[row_id]
        else:
            found = [new_only.decrypt(value)] + ([new_only.decrypt(previous)] if previous else [])
            assert found == secrets[row_id]
    assert {(r[3], r[5]) for r in stored} == {(new_only.key_id, None), (new_only.key_id, new_only.key_id)}

    # And a second run changes nothing
    code, out = rotate_keys()
    assert code == 0 and "in 0 batch(es)" in out, out
    assert sql(STORED) == stored
