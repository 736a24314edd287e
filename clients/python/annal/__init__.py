"""Annal's Python client.

Offline verification, with nothing but the log's verifier key (and, for
witnesses, a c2sp.org/tlog-policy), of what an Annal log hands out:

- annal.note: signed notes, checkpoints, cosignature/v1 and policies;
- annal.proof: c2sp.org/tlog-proof@v1 proofs and consistency proofs;
- annal.merkle: RFC 6962 hashes and proof checks;
- annal.jcs: RFC 8785 canonical JSON and the strict entry reader;
- annal.client: an HTTP client of annald with the Go client's surface
  (submit, holds, execute intents and results, budget, history and the
  live stream, blobs, the agent file system, sealed payloads, signed
  requests, retries), whose error answers raise annal.errors.APIError and
  its subclasses;
- annal.execute: the payloads and content ids of execute intents and results;
- annal.vfspath: vfs://{agent}/{path} URIs of the agent file system;
- annal.signing: Ed25519 request-signing keys and the signed statement.

Byte formats: testvectors/FORMATS.md in the Annal repository. Every refusal
raises annal.errors.VerificationError."""

from .client import CLI_RETRY, Client
from .errors import (APIError, ConflictError, DeniedError, HoldPendingError, HoldRefusedError, NotFoundError,
                     VerificationError)
from .execute import Intent, Result
from .merkle import leaf_hash
from .note import Checkpoint, Policy, VerifierKey, open_checkpoint
from .proof import ProofResult, verify_consistency, verify_proof
from .signing import SigningKey

__version__ = "0.1.0"
__all__ = ["APIError", "CLI_RETRY", "Checkpoint", "Client", "ConflictError", "DeniedError", "HoldPendingError",
           "HoldRefusedError", "Intent", "NotFoundError", "Policy", "ProofResult", "Result", "SigningKey",
           "VerificationError", "VerifierKey", "leaf_hash", "open_checkpoint", "verify_consistency", "verify_proof",
           "__version__"]
