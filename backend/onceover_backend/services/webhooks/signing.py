"""Standard Webhooks signatures (https://www.standardwebhooks.com/): the secret, and
the three headers every delivery carries.

``webhook-signature`` is ``v1,`` and the base64 HMAC-SHA256, keyed with the secret's
bytes (the base64 after ``whsec_``), of ``"{webhook-id}.{webhook-timestamp}.{body}"``.
Receivers verify it with any Standard Webhooks library, and refuse timestamps too far
from their clock (replays).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"  # noqa: S105 (the format of a secret, not one)
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def new_message_id() -> str:
    return f"msg_{secrets.token_hex(16)}"


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, message_id: str, timestamp: int, body: str) -> str:
    signed = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret: str, message_id: str, timestamp: int, body: str) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
    }
