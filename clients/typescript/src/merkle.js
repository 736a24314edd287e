// RFC 6962 §2.1 hashes and the inclusion and consistency checks, written
// after transparency-dev/merkle's proof package (which Annal's Go verifier
// uses), with the same error messages. Sizes and indexes are bigint.

import { concat, encodeBase64, equalBytes } from "./encoding.js";
import { sha256 } from "./note.js";

/** SHA-256(0x00 || entry): the leaf hash of a log entry. */
export function leafHash(/** @type {Uint8Array} */ entry) {
  return sha256(concat(Uint8Array.of(0), entry));
}

/** SHA-256(0x01 || left || right): an interior node's hash. */
export function nodeHash(/** @type {Uint8Array} */ left, /** @type {Uint8Array} */ right) {
  return sha256(concat(Uint8Array.of(1), left, right));
}

/** The computed root differs from the one expected. */
export class RootMismatchError extends Error {
  /** @param {Uint8Array} calculated @param {Uint8Array} expected */
  constructor(calculated, expected) {
    super(`the proof leads to root ${encodeBase64(calculated)}, the checkpoint's root is ${encodeBase64(expected)}`);
    this.name = "RootMismatchError";
    this.calculated = calculated;
    this.expected = expected;
  }
}

function bitLength(/** @type {bigint} */ x) {
  return x === 0n ? 0 : x.toString(2).length;
}
function onesCount(/** @type {bigint} */ x) {
  return [...x.toString(2)].filter((c) => c === "1").length;
}
function trailingZeros(/** @type {bigint} */ x) {
  let n = 0;
  while (x > 0n && (x & 1n) === 0n) {
    x >>= 1n;
    n++;
  }
  return n;
}
function decompose(/** @type {bigint} */ index, /** @type {bigint} */ size) {
  const inner = bitLength(index ^ (size - 1n));
  return [inner, onesCount(index >> BigInt(inner))];
}

async function chainInner(/** @type {Uint8Array} */ seed, /** @type {Uint8Array[]} */ proof, /** @type {bigint} */ index) {
  for (let i = 0; i < proof.length; i++) {
    seed = ((index >> BigInt(i)) & 1n) === 0n ? await nodeHash(seed, proof[i]) : await nodeHash(proof[i], seed);
  }
  return seed;
}
async function chainInnerRight(/** @type {Uint8Array} */ seed, /** @type {Uint8Array[]} */ proof, /** @type {bigint} */ index) {
  for (let i = 0; i < proof.length; i++) {
    if (((index >> BigInt(i)) & 1n) === 1n) seed = await nodeHash(proof[i], seed);
  }
  return seed;
}
async function chainBorderRight(/** @type {Uint8Array} */ seed, /** @type {Uint8Array[]} */ proof) {
  for (const h of proof) seed = await nodeHash(h, seed);
  return seed;
}

/**
 * Checks that leaf is at index of the tree of size whose root is root.
 * @param {bigint} index @param {bigint} size @param {Uint8Array} leaf
 * @param {Uint8Array[]} proof @param {Uint8Array} root
 */
export async function verifyInclusion(index, size, leaf, proof, root) {
  if (index >= size) throw new Error(`index is beyond size: ${index} >= ${size}`);
  const [inner, border] = decompose(index, size);
  if (proof.length !== inner + border) throw new Error(`wrong proof size ${proof.length}, want ${inner + border}`);
  let res = await chainInner(leaf, proof.slice(0, inner), index);
  res = await chainBorderRight(res, proof.slice(inner));
  if (!equalBytes(res, root)) throw new RootMismatchError(res, root);
}

/**
 * Checks that the tree of size1 with root1 is a prefix of the tree of
 * size2 with root2.
 * @param {bigint} size1 @param {bigint} size2 @param {Uint8Array[]} proof
 * @param {Uint8Array} root1 @param {Uint8Array} root2
 */
export async function verifyConsistency(size1, size2, proof, root1, root2) {
  const match = (/** @type {Uint8Array} */ got, /** @type {Uint8Array} */ want) => {
    if (!equalBytes(got, want)) throw new RootMismatchError(got, want);
  };
  if (size2 < size1) throw new Error(`size2 (${size1}) < size1 (${size2})`);
  if (size1 === size2) {
    if (proof.length > 0) throw new Error("size1=size2, but proof is not empty");
    return match(root1, root2);
  }
  if (size1 === 0n) {
    if (proof.length > 0) throw new Error(`expected empty proof, but got ${proof.length} components`);
    return;
  }
  if (proof.length === 0) throw new Error("empty proof");
  let [inner, border] = decompose(size1 - 1n, size2);
  const shift = trailingZeros(size1);
  inner -= shift;
  let seed = proof[0];
  let start = 1;
  if (size1 === 1n << BigInt(shift)) {
    seed = root1;
    start = 0;
  }
  if (proof.length !== start + inner + border) {
    throw new Error(`wrong proof size ${proof.length}, want ${start + inner + border}`);
  }
  const rest = proof.slice(start);
  const mask = (size1 - 1n) >> BigInt(shift);
  let hash1 = await chainInnerRight(seed, rest.slice(0, inner), mask);
  hash1 = await chainBorderRight(hash1, rest.slice(inner));
  match(hash1, root1);
  let hash2 = await chainInner(seed, rest.slice(0, inner), mask);
  hash2 = await chainBorderRight(hash2, rest.slice(inner));
  match(hash2, root2);
}
