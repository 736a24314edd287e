"""Errors raised by the annal package.

VerificationError is raised by every offline check (notes, checkpoints,
proofs, cosignatures, entries); APIError by the HTTP client, carrying the
fields of annald's JSON error body (api.Error)."""

from __future__ import annotations



class VerificationError(Exception):
    """Something presented as proof does not prove what it claims, or is not
    in the exact form FORMATS.md requires."""
