"""Standard Webhooks v1 signatures: the spec's test vector, rotation's two signatures, and what verify refuses."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from gatehouse.webhooks import SignatureInvalid, verify
from gatehouse.webhooks.signing import body_of, new_secret, sign

# The test vector of the Standard Webhooks specification (and of the Svix libraries).
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = datetime.fromtimestamp(1614265330, UTC)
BODY = '{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_spec_vector_signs_as_the_spec_says():
    headers = sign(MSG_ID, TIMESTAMP, BODY, [SECRET])
    assert headers == {
        "webhook-id": MSG_ID,
        "webhook-timestamp": "1614265330",
        "webhook-signature": SIGNATURE,
    }


def now_headers(body: str, secrets: list[str]) -> dict[str, str]:
    return sign("msg_1", datetime.now(UTC), body, secrets)


def test_during_a_rotation_both_secrets_verify_one_request():
    old, new = new_secret(), new_secret()
    headers = now_headers(BODY, [new, old])
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert verify(headers, BODY, old) == {"test": 2432232314}
    assert verify(headers, BODY.encode(), new) == {"test": 2432232314}
    with pytest.raises(SignatureInvalid):
        verify(headers, BODY, new_secret())


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h, b: (h, b.replace("2432232314", "1")),  # another body
        lambda h, b: ({**h, "webhook-id": "msg_2"}, b),  # another id
        lambda h, b: ({**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 1)}, b),
        lambda h, b: ({**h, "webhook-timestamp": "1614265330"}, b),  # too old (replayed)
        lambda h, b: ({**h, "webhook-signature": "v1,not-base64!"}, b),  # malformed
        lambda h, b: ({**h, "webhook-signature": "garbage"}, b),
        lambda h, b: ({k: v for k, v in h.items() if k != "webhook-signature"}, b),
    ],
)
def test_verify_refuses_a_tampered_stale_or_malformed_request(tamper):
    secret = new_secret()
    headers, body = tamper(now_headers(BODY, [secret]), BODY)
    with pytest.raises(SignatureInvalid):
        verify(headers, body, secret)


def test_secrets_are_whsec_and_32_random_bytes():
    a, b = new_secret(), new_secret()
    assert a.startswith("whsec_") and a != b
    assert len(base64.b64decode(a.removeprefix("whsec_"))) == 32


def test_the_body_is_the_stored_payload_as_compact_json_unescaped():
    assert body_of({"type": "t", "data": {"name": "Stół"}}) == '{"type":"t","data":{"name":"Stół"}}'
