// @annal/client: offline verification of Annal's logs (checkpoints,
// tlog-proofs, consistency proofs, witness cosignature policies, leaf
// hashes), with WebCrypto (and @noble/post-quantum for ML-DSA-44), for
// Node 20+ and browsers; and a small HTTP client of annald.

export { VerificationError } from "./errors.js";
export { decodeBase64, encodeBase64, fromHex, parseDecimal, toHex } from "./encoding.js";
export { InvalidSignatureError, MalformedNoteError, UnverifiedNoteError, keyHash, newVerifier, openNote } from "./note.js";
export { MAX_CHECKPOINT_SIZE, marshalCheckpoint, openCheckpoint, parseCheckpointBody, parseHash } from "./checkpoint.js";
export { RootMismatchError, leafHash, nodeHash, verifyConsistency, verifyInclusion } from "./merkle.js";
export {
  TLOG_PROOF_HEADER,
  logVerifier,
  marshalTLogProof,
  parseHashes,
  parseTLogProof,
  verifyConsistencyProof,
  verifyProof,
} from "./proof.js";
export { Policy, parsePolicy, verifyProofWithPolicy, witnessVerifier } from "./policy.js";
export { canonicalJSON } from "./canonical.js";
export { MAX_ENTRY_SIZE, readEntryJSON } from "./entry.js";
export { AnnalClient, AnnalError, DEFAULT_RETRY, MAX_BLOB_BODY, MAX_RESPONSE_BODY } from "./client.js";
export { MAX_VFS_CONTENT, VFSPath, VFSPathError, parseVFS, parseVFSURI, vfsWriteRequest } from "./vfspath.js";
export {
  HoldRefusedError,
  canonicalCommand,
  canonicalToolCall,
  canonicalToolResult,
  contentID,
  intentPayload,
  oidOf,
  resultPayload,
} from "./execute.js";
export {
  SEAL_CONTEXT,
  SIGNATURE_HEADER,
  SIGNED_STATEMENT_CONTEXT,
  SigningKey,
  generateSigningKey,
  loadSigningKey,
  sealCommitment,
  sealedBody,
  signedStatement,
} from "./signing.js";
export { ZERO_DELTA_HASH, checkDeltaEvent, deltaHash, verifyDeltaChain, verifyDeltaList } from "./deltas.js";
export { EVIDENCE_FORMAT, MAX_EVIDENCE_SIZE, verifyEvidence } from "./evidence.js";
