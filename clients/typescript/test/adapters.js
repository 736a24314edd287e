// Shared setup of the adapters' tests: a real annald, a human who answers
// holds, and an agent whose envelope grants some tools, holds one
// (tools/deploy) and leaves tools/rm out, so that a call of rm is denied.
import { AnnalClient } from "@annal/client";
import { startAnnald } from "./annald.js";

export const GRANTS = [
  { pattern: "tools/add", actions: ["execute"] },
  { pattern: "tools/deploy", actions: ["execute"] },
  { pattern: "tools/lookup", actions: ["observe"] },
];

/** Starts annald and makes the agent; undefined without go (the test skips). */
export async function adapterWorld() {
  const annald = await startAnnald();
  if (!annald) return undefined;
  const root = new AnnalClient(annald.url, { credential: annald.rootCredential });
  const a = await root.createAgent({ name: "tool-user", purpose: "calls tools", energy: 1_000_000, trust: 0.9, grants: GRANTS });
  await root.issueEnvelope({
    holder: a.id,
    budget: 100_000,
    grants: GRANTS,
    hold_on: [{ pattern: "tools/deploy", actions: ["execute"] }],
  });
  const agent = new AnnalClient(annald.url, { credential: a.credential });
  return { annald, root, agent, agentId: a.id };
}

/** The log's entries from index from on, parsed. @param {AnnalClient} c @param {number} from */
export async function entriesSince(c, from) {
  const { size } = await c.info();
  const out = [];
  for (let i = from; i < size; i++) out.push({ index: i, ...JSON.parse(new TextDecoder().decode(await c.event(i))) });
  return out;
}

/** The log's size now. @param {AnnalClient} c */
export async function logSize(c) {
  return (await c.info()).size;
}
