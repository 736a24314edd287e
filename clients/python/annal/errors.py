"""Errors raised by the annal package.

VerificationError is raised by every offline check (notes, checkpoints,
proofs, cosignatures, entries); APIError by the HTTP client, carrying the
fields of annald's JSON error body (api.Error)."""

from __future__ import annotations



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
