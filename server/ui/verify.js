// Verification of Annal log proofs in the browser, with WebCrypto only
// (Ed25519, SHA-256). It shares no code with the server and trusts nothing
// the server says: the log key and witness policy come from the person
// (see the Trust view), every byte fetched is checked against them.
//
// Formats: c2sp.org/signed-note, c2sp.org/tlog-checkpoint,
// c2sp.org/tlog-cosignature (cosignature/v1), c2sp.org/tlog-proof,
// c2sp.org/tlog-policy; Merkle proofs as RFC 9162 §2.1.3 and §2.1.4.
'use strict';

(() => {
  const utf8 = new TextEncoder();
  const strictUTF8 = new TextDecoder('utf-8', { fatal: true });

  class VerifyError extends Error {}
  const fail = (msg) => { throw new VerifyError(msg); };

  function concat(...parts) {
    let n = 0;
    for (const p of parts) n += p.length;
    const out = new Uint8Array(n);
    let o = 0;
    for (const p of parts) { out.set(p, o); o += p.length; }
    return out;
  }

  function equalBytes(a, b) {
    if (a.length !== b.length) return false;
    let d = 0;
    for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
    return d === 0;
  }

  function fromBase64(s, what) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) fail(`${what} is not standard base64`);
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function hex(b) { return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(''); }

  async function sha256(...parts) {
    if (!globalThis.crypto || !crypto.subtle) {
      fail('this page has no WebCrypto: open the console over HTTPS or on localhost');
    }
    return new Uint8Array(await crypto.subtle.digest('SHA-256', concat(...parts)));
  }

  async function ed25519Verify(pub, sig, msg) {
    let key;
    try {
      key = await crypto.subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']);
    } catch (e) {
      fail(`this browser cannot check Ed25519 with WebCrypto (${e.message})`);
    }
    return crypto.subtle.verify({ name: 'Ed25519' }, key, sig, msg);
  }

  const decimal = /^(0|[1-9][0-9]{0,19})$/;
  function parseDecimal(s, what) {
    if (!decimal.test(s)) fail(`${what} ${JSON.stringify(s)} is not a decimal number`);
    const v = BigInt(s);
    if (v >= 1n << 64n) fail(`${what} is larger than 2^64-1`);
    return v;
  }

  // A note verifier key: <name>+<8 hex key hash>+<base64 type byte || key>.
  // The key hash is SHA-256(name || "\n" || type || key)[:4].
  async function parseVerifierKey(vkey, wantType, what) {
    // The name holds no "+"; the base64 key may.
    const m = /^([^+\s]+)\+([0-9a-f]{8})\+(\S+)$/.exec(vkey.trim());
    if (!m) fail(`${what} is not a verifier key (<name>+<hash>+<key>)`);
    const [, name, hashHex, keyB64] = m;
    const key = fromBase64(keyB64, `${what}'s key`);
    if (key.length !== 33 || key[0] !== wantType) {
      fail(`${what} is not a ${wantType === 1 ? 'Ed25519 log' : 'cosignature/v1 witness'} key`);
    }
    const id = (await sha256(utf8.encode(name + '\n'), key)).slice(0, 4);
    if (hex(id) !== hashHex) fail(`${what} has the key hash ${hashHex}, but its name and key give ${hex(id)}`);
    return { name, id, pub: key.slice(1), vkey: vkey.trim() };
  }

  // A signed note: text, a blank line, then lines "— <name> <base64>".
  function parseNote(bytes, what) {
    let text;
    try { text = strictUTF8.decode(bytes); } catch { fail(`${what} is not UTF-8`); }
    const split = text.lastIndexOf('\n\n');
    if (split < 0 || !text.endsWith('\n')) fail(`${what} is not a signed note`);
    const body = text.slice(0, split + 1);
    const sigs = [];
    for (const line of text.slice(split + 2, -1).split('\n')) {
      const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
      if (!m) fail(`${what} has a malformed signature line`);
      const blob = fromBase64(m[2], `${what}'s signature`);
      if (blob.length < 5) fail(`${what} has a signature line too short to be one`);
      sigs.push({ name: m[1], id: blob.slice(0, 4), sig: blob.slice(4) });
    }
    if (sigs.length === 0) fail(`${what} has no signature`);
    return { body, bodyBytes: utf8.encode(body), sigs };
  }

  function parseCheckpointBody(body) {
    const lines = body.split('\n');
    if (lines.length < 4) fail('the checkpoint has fewer than three lines');
    const root = fromBase64(lines[2], "the checkpoint's root hash");
    if (root.length !== 32) fail("the checkpoint's root hash is not 32 bytes");
    return { origin: lines[0], size: parseDecimal(lines[1], "the checkpoint's size"), root };
  }

  // c2sp.org/tlog-policy: log, witness, group and quorum lines.
  async function parsePolicy(text) {
    const p = { logs: [], witnesses: new Map(), groups: new Map(), quorum: '' };
    const defined = (n) => p.witnesses.has(n) || p.groups.has(n);
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (line === '' || line.startsWith('#')) continue;
      const f = line.split(/[ \t]+/);
      const bad = (m) => fail(`policy line ${i + 1}: ${m}`);
      switch (f[0]) {
        case 'log':
          if (f.length < 2 || f.length > 3) bad('want: log <vkey> [<url>]');
          p.logs.push(await parseVerifierKey(f[1], 1, `policy line ${i + 1}'s log key`));
          break;
        case 'witness':
          if (f.length < 3 || f.length > 4) bad('want: witness <name> <vkey> [<url>]');
          if (defined(f[1]) || f[1] === 'none') bad(`${f[1]} is defined twice`);
          p.witnesses.set(f[1], await parseVerifierKey(f[2], 4, `witness ${f[1]}`));
          break;
        case 'group': {
          if (f.length < 4) bad('want: group <name> <all|any|k> <name>...');
          if (defined(f[1]) || f[1] === 'none') bad(`${f[1]} is defined twice`);
          const members = f.slice(3);
          for (const m of members) if (!defined(m)) bad(`member ${m} is not defined on an earlier line`);
          if (new Set(members).size !== members.length) bad('a member is listed twice');
          let k = f[2] === 'all' ? members.length : f[2] === 'any' ? 1 : Number(f[2]);
          if (!Number.isInteger(k) || k < 1 || k > members.length) bad(`threshold ${f[2]} is not 1 to ${members.length}`);
          p.groups.set(f[1], { k, members });
          break;
        }
        case 'quorum':
          if (f.length !== 2) bad('want: quorum <name>');
          if (p.quorum !== '') bad('a second quorum line');
          if (f[1] !== 'none' && !defined(f[1])) bad(`quorum ${f[1]} is not defined on an earlier line`);
          p.quorum = f[1];
          break;
        default:
          bad(`unknown keyword ${JSON.stringify(f[0])}`);
      }
    }
    if (p.quorum === '') fail('the policy has no quorum line');
    return p;
  }

  function quorumMet(policy, cosigned, name = policy.quorum) {
    if (name === 'none') return true;
    if (policy.witnesses.has(name)) return cosigned.has(name);
    const g = policy.groups.get(name);
    return g.members.filter((m) => quorumMet(policy, cosigned, m)).length >= g.k;
  }

  // openCheckpoint checks a checkpoint note against the trusted log key and
  // witness policy and returns its parsed body and who cosigned it.
  async function openCheckpoint(bytes, trust, what) {
    const note = parseNote(bytes, what);
    const log = trust.log;
    let signed = false;
    for (const s of note.sigs) {
      if (s.name !== log.name || !equalBytes(s.id, log.id)) continue;
      if (s.sig.length !== 64 || !(await ed25519Verify(log.pub, s.sig, note.bodyBytes))) {
        fail(`${what}: the signature of ${log.name} does not verify`);
      }
      signed = true;
    }
    if (!signed) fail(`${what} carries no signature of the trusted log key ${log.name}`);
    const cp = parseCheckpointBody(note.body);
    if (cp.origin !== log.name) fail(`${what} is of the log ${JSON.stringify(cp.origin)}, not ${log.name}`);
    const cosigned = new Map(); // witness name -> cosignature time (seconds)
    if (trust.policy) {
      for (const [name, w] of trust.policy.witnesses) {
        for (const s of note.sigs) {
          if (s.name !== w.name || !equalBytes(s.id, w.id)) continue;
          if (s.sig.length !== 72) fail(`${what}: the cosignature of witness ${name} is not 72 bytes`);
          const ts = new DataView(s.sig.buffer, s.sig.byteOffset, 8).getBigUint64(0);
          const msg = concat(utf8.encode(`cosignature/v1\ntime ${ts}\n`), note.bodyBytes);
          if (!(await ed25519Verify(w.pub, s.sig.slice(8), msg))) fail(`${what}: the cosignature of witness ${name} does not verify`);
          cosigned.set(name, ts);
        }
      }
      if (!quorumMet(trust.policy, cosigned)) {
        fail(`${what} is not cosigned by the policy's quorum ${trust.policy.quorum} (cosigned by: ${[...cosigned.keys()].join(', ') || 'no witness'})`);
      }
    }
    return { ...cp, cosigned, note };
  }

  async function nodeHash(l, r) { return sha256(Uint8Array.of(1), l, r); }

  // RFC 9162 §2.1.3.2.
  async function rootFromInclusion(index, size, leaf, path) {
    if (index >= size) fail(`index ${index} is not below the tree size ${size}`);
    let fn = index, sn = size - 1n, r = leaf;
    for (const p of path) {
      if (sn === 0n) fail('the inclusion proof is longer than the tree is deep');
      if ((fn & 1n) === 1n || fn === sn) {
        r = await nodeHash(p, r);
        while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        r = await nodeHash(r, p);
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n) fail('the inclusion proof is shorter than the tree is deep');
    return r;
  }

  // RFC 9162 §2.1.4.2: is the tree (size2, root2) an extension of
  // (size1, root1)?
  async function verifyConsistency(size1, root1, size2, root2, path) {
    if (size1 > size2) fail(`a checkpoint of size ${size2} is older than one of size ${size1} this browser saw`);
    if (size1 === size2) {
      if (path.length !== 0 || !equalBytes(root1, root2)) fail(`two different trees of size ${size1}: the log forked`);
      return;
    }
    if (size1 === 0n) return;
    if (path.length === 0) fail('an empty consistency proof');
    if ((size1 & (size1 - 1n)) === 0n) path = [root1, ...path];
    let fn = size1 - 1n, sn = size2 - 1n;
    while ((fn & 1n) === 1n) { fn >>= 1n; sn >>= 1n; }
    let fr = path[0], sr = path[0];
    for (const c of path.slice(1)) {
      if (sn === 0n) fail('the consistency proof is too long');
      if ((fn & 1n) === 1n || fn === sn) {
        fr = await nodeHash(c, fr); sr = await nodeHash(c, sr);
        while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        sr = await nodeHash(sr, c);
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n || !equalBytes(fr, root1) || !equalBytes(sr, root2)) {
      fail(`the tree of size ${size2} does not extend the tree of size ${size1} this browser saw: the log forked`);
    }
  }

  // c2sp.org/tlog-proof@v1.
  function parseTLogProof(bytes) {
    let text;
    try { text = strictUTF8.decode(bytes); } catch { fail('the tlog-proof is not UTF-8'); }
    const lines = text.split('\n');
    let i = 0;
    if (lines[i++] !== 'c2sp.org/tlog-proof@v1') fail('not a c2sp.org/tlog-proof@v1');
    if (lines[i].startsWith('extra ')) i++;
    const m = /^index (\S+)$/.exec(lines[i++] || '');
    if (!m) fail('the tlog-proof has no index line');
    const index = parseDecimal(m[1], "the tlog-proof's index");
    const hashes = [];
    while (i < lines.length && lines[i] !== '') {
      const h = fromBase64(lines[i++], 'a proof hash');
      if (h.length !== 32) fail('a proof hash is not 32 bytes');
      hashes.push(h);
    }
    if (lines[i++] !== '') fail('the tlog-proof has no checkpoint');
    return { index, hashes, checkpoint: utf8.encode(lines.slice(i).join('\n')) };
  }

  function parseHashLines(bytes) {
    const text = strictUTF8.decode(bytes);
    return text.split('\n').filter((l) => l !== '').map((l) => {
      const h = fromBase64(l, 'a consistency proof hash');
      if (h.length !== 32) fail('a consistency proof hash is not 32 bytes');
      return h;
    });
  }

  // loadTrust reads the trusted log key and policy (as the person saved
  // them) into verifier form.
  async function loadTrust(keyText, policyText) {
    if (!keyText) fail('no log key is trusted yet: set it in the Trust view');
    const log = await parseVerifierKey(keyText, 1, 'the trusted log key');
    let policy = null;
    if (policyText && policyText.trim() !== '') {
      policy = await parsePolicy(policyText);
      if (policy.logs.length > 0 && !policy.logs.some((l) => l.vkey === log.vkey)) {
        fail('the witness policy names another log key than the trusted one');
      }
    }
    return { log, policy };
  }

  // verifyEvent fetches (with fetchBytes(path) -> Uint8Array) the latest
  // checkpoint, the tlog-proof and the entry of index, checks every step
  // and returns the steps taken; it throws VerifyError at the first that
  // fails. seen is the largest checkpoint this browser verified before
  // ({size, root} or null); the result's seen is the new one to keep.
  async function verifyEvent(index, trust, fetchBytes, seen) {
    const steps = [];
    const step = (name, detail) => steps.push({ name, detail });
    const want = BigInt(index);
    const proof = parseTLogProof(await fetchBytes(`/v1/proof/${want}`));
    if (proof.index !== want) fail(`the server sent a proof for index ${proof.index}, not ${want}`);
    const cp = await openCheckpoint(proof.checkpoint, trust, "the proof's checkpoint");
    step('Checkpoint signed by the trusted log key', `${cp.origin}, size ${cp.size}`);
    if (trust.policy) {
      const who = [...cp.cosigned].map(([n, t]) => `${n} at ${new Date(Number(t) * 1000).toISOString()}`);
      step(`Witness quorum "${trust.policy.quorum}" met`, who.join('; ') || 'quorum none');
    } else {
      step('No witness policy trusted', 'the log signature alone was checked');
    }
    const entry = await fetchBytes(`/v1/events/${want}`);
    const leaf = await sha256(Uint8Array.of(0), entry);
    step('Entry hashed', `leaf hash ${hex(leaf)}`);
    const root = await rootFromInclusion(want, cp.size, leaf, proof.hashes);
    if (!equalBytes(root, cp.root)) fail(`the entry and the inclusion proof give root ${hex(root)}, but the checkpoint commits to ${hex(cp.root)}`);
    step('Inclusion proof leads to the checkpoint root', `${proof.hashes.length} hashes`);
    const latest = await openCheckpoint(await fetchBytes('/checkpoint'), trust, 'the latest checkpoint');
    let newest = latest.size >= cp.size ? latest : cp;
    const older = latest.size >= cp.size ? cp : latest;
    await checkConsistent(older, newest, fetchBytes);
    step('Latest checkpoint is consistent with the proof\'s', `size ${latest.size}`);
    if (seen) {
      const prev = { size: BigInt(seen.size), root: fromBase64(seen.root, 'the remembered root') };
      if (prev.size > newest.size) {
        await checkConsistent(newest, prev, fetchBytes);
        newest = prev;
      } else {
        await checkConsistent(prev, newest, fetchBytes);
      }
      step('Consistent with what this browser saw before', `size ${prev.size}`);
    }
    const keep = { size: newest.size.toString(), root: btoa(String.fromCharCode(...newest.root)) };
    return { steps, entry, leafHash: hex(leaf), seen: keep };
  }

  async function checkConsistent(a, b, fetchBytes) {
    if (a.size === b.size || a.size === 0n) {
      await verifyConsistency(a.size, a.root, b.size, b.root, []);
      return;
    }
    const path = parseHashLines(await fetchBytes(`/v1/proof/consistency?old=${a.size}&new=${b.size}`));
    await verifyConsistency(a.size, a.root, b.size, b.root, path);
  }

  globalThis.AnnalVerify = Object.freeze({ verifyEvent, loadTrust, VerifyError, hex });
})();
