"""Annal's Python client.

Offline verification, with nothing but the log's verifier key (and, for
witnesses, a c2sp.org/tlog-policy), of what an Annal log hands out:

- annal.note: signed notes, checkpoints, cosignature/v1 and policies;
- annal.proof: c2sp.org/tlog-proof@v1 proofs and consistency proofs;
- annal.merkle: RFC 6962 hashes and proof checks;
- annal.jcs: RFC 8785 canonical JSON and the strict entry reader;
- annal.client: a urllib client of annald (submit, holds, proofs), whose
  error answers raise annal.errors.APIError and its subclasses.

Byte formats: testvectors/FORMATS.md in the Annal repository. Every refusal
raises annal.errors.VerificationError."""

from .errors import VerificationError
from .merkle import leaf_hash
from .note import Checkpoint, Policy, VerifierKey, open_checkpoint
from .proof import ProofResult, verify_consistency, verify_proof

__version__ = "0.1.0"
__all__ = ["Checkpoint", "Policy", "ProofResult", "VerificationError", "VerifierKey", "leaf_hash",
           "open_checkpoint", "verify_consistency", "verify_proof", "__version__"]
