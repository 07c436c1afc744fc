"""The old path of `struckdown.approval.signing` (docs/approval.md named it): a re-export."""

from .approval.signing import (
    KEY_ENV,
    SIGNATURE,
    call_hash,
    digests,
    key_file,
    key_id,
    sign_state,
    state_key,
    using_state_key,
    verify_state,
)

__all__ = [
    "KEY_ENV", "SIGNATURE", "call_hash", "digests", "key_file", "key_id", "sign_state", "state_key",
    "using_state_key", "verify_state",
]
