"""Errors raised by the annal package.

VerificationError is raised by every offline check (notes, checkpoints,
proofs, cosignatures, entries); APIError by the HTTP client, carrying the
fields of annald's JSON error body (api.Error)."""

from __future__ import annotations

from typing import Any, Dict

class VerificationError(Exception):
    """Something presented as proof does not prove what it claims, or is not
    in the exact form FORMATS.md requires."""


class APIError(Exception):
    """An answer of status 300 or more from annald, with the fields of its
    JSON error body (api.Error): stage and gate of the check that refused
    an action, the spec's reason name, and denial_index, the log index of
    the event that recorded the refusal (None when none did)."""

    def __init__(self, status: int, message: str, *, stage: str = "", gate: str = "", reason: str = "",
                 denial_index: "int | None" = None, signal: str = "", trace_id: str = "",
                 outcome_unknown: bool = False, retryable: bool = False, stopped: bool = False,
                 retry_after: "float | None" = None) -> None:
        super().__init__(f"annald answered {status}: {message}")
        self.status = status
        self.message = message
        self.stage = stage
        self.gate = gate
        self.reason = reason
        self.denial_index = denial_index
        self.signal = signal
        self.trace_id = trace_id
        self.outcome_unknown = outcome_unknown
        self.retryable = retryable
        self.stopped = stopped
        self.retry_after = retry_after


class DeniedError(APIError):
    """A gate of the kernel refused the action (stage and gate set); the
    refusal is logged at denial_index when the kernel recorded it."""


class NotFoundError(APIError):
    """404: no such event, hold, actor or route."""


class ConflictError(APIError):
    """409: for a proof, no signed checkpoint covers the entry yet."""


class HoldRefusedError(Exception):
    """An intent a human rejected, or whose hold timed out or failed: what
    it was about to run must not run. hold is annald's record of the hold."""

    def __init__(self, hold: Dict[str, Any]) -> None:
        msg = f"hold {hold.get('id')} of {hold.get('type')} on {hold.get('target')} was {hold.get('status')}"
        if hold.get("answered_by"):
            msg += f" by {hold['answered_by']}"
        if hold.get("reason"):
            msg += f": {hold['reason']}"
        super().__init__(msg)
        self.hold = hold
        self.hold_id: str = str(hold.get("id", ""))
        self.status: str = str(hold.get("status", ""))


class HoldPendingError(TimeoutError):
    """A held intent no human answered within the wait the caller gave: it
    is still held (hold_id), and nothing may run yet."""

    def __init__(self, hold_id: str, waited: float) -> None:
        super().__init__(f"hold {hold_id} is still waiting for a human after {waited:.1f}s")
        self.hold_id = hold_id
