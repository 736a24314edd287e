// The offline verifier's error: which check failed, and why, in the words
// of Annal's Go verifier ("<check>: <reason>").

export class VerificationError extends Error {
  /**
   * @param {string} check the check that failed: "verifier key", "proof format",
   *   "checkpoint signature", "index", "entry", "inclusion", "consistency", "policy"
   * @param {string} reason
   */
  constructor(check, reason) {
    super(`${check}: ${reason}`);
    this.name = "VerificationError";
    this.check = check;
    this.reason = reason;
  }
}

/** Runs f, turning any plain error into a VerificationError of check. */
export async function within(/** @type {string} */ check, /** @type {() => any} */ f) {
  try {
    return await f();
  } catch (e) {
    if (e instanceof VerificationError) throw e;
    throw new VerificationError(check, /** @type {Error} */ (e).message);
  }
}
