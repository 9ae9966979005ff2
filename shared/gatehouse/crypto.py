"""Encryption of secrets at rest (the sellers' WB tokens): Fernet, with key rotation."""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from gatehouse.errors import ConfigurationError
from gatehouse.settings import Settings


class TokenCipher:
    def __init__(self, settings: Settings) -> None:
        keys = [k.strip() for k in settings.require("token_encryption_key").split(",") if k.strip()]
        try:
            self._fernet = MultiFernet([Fernet(k) for k in keys])
        except ValueError:
            raise ConfigurationError(
                "TOKEN_ENCRYPTION_KEY must be Fernet keys (32 url-safe base64-encoded bytes each); "
                'generate one with: python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
            ) from None

    def encrypt(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def decrypt(self, ciphertext: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise ConfigurationError(
                "a stored secret (a WB token or a webhook secret) cannot be decrypted with TOKEN_ENCRYPTION_KEY"
            ) from None


def generate_key() -> str:
    return Fernet.generate_key().decode()
