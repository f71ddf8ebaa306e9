import { isUtf8 } from "node:buffer";

/**
 * murmurCollisions makes 2^pairs distinct UTF-8 keys of 8 × pairs bytes
 * that have one MurmurHash3 (x86, 32 bits) under every seed: the
 * seed-independent multicollisions behind hash flooding. The round
 * function f(x) = rotl(x, 13) × 5 + c turns an input difference at bit 18
 * into an output difference at bit 31 whatever x is, and a difference at
 * bit 31 of the next block's mixed word cancels it; each 8-byte block pair
 * can therefore be written two ways, and the ways combine freely; words
 * are drawn until all four are UTF-8 on their own. Test
 * support: it is how a client holding a worker token would attack the
 * registry.
 */
export function murmurCollisions(pairs: number, random: () => number = Math.random): string[] {
  const blocks: [Buffer, Buffer][] = [];
  while (blocks.length < pairs) {
    const a = randomWord(random);
    const b = randomWord(random);
    const a2 = unmix(mix(a) ^ (1 << 18));
    const b2 = unmix(mix(b) ^ (1 << 31));
    // Words that are whole UTF-8 sequences on their own make valid keys in any order.
    if (![a, b, a2, b2].every((word) => isUtf8(wordBytes(word)))) continue;
    blocks.push([Buffer.concat([wordBytes(a), wordBytes(b)]), Buffer.concat([wordBytes(a2), wordBytes(b2)])]);
  }
  let keys = [Buffer.alloc(0)];
  for (const [one, other] of blocks) keys = keys.flatMap((key) => [Buffer.concat([key, one]), Buffer.concat([key, other])]);
  return keys.map((key) => key.toString("utf8"));
}

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** mix is MurmurHash3's treatment of one 4-byte word before it enters the state. */
function mix(k: number): number {
  k = Math.imul(k, C1);
  return Math.imul((k << 15) | (k >>> 17), C2);
}

/** unmix inverts mix: C1 and C2 are odd, so multiplication by them is a bijection modulo 2^32. */
function unmix(m: number): number {
  m = Math.imul(m, inverse(C2));
  m = (m >>> 15) | (m << 17);
  return Math.imul(m, inverse(C1)) | 0;
}

/** inverse is the multiplicative inverse of an odd number modulo 2^32 (Newton's iteration). */
function inverse(a: number): number {
  let x = a;
  for (let i = 0; i < 5; i++) x = Math.imul(x, 2 - Math.imul(a, x));
  return x;
}

function randomWord(random: () => number): number {
  return Math.floor(random() * 2 ** 32) | 0;
}

/** wordBytes is a word's four bytes, little-endian as MurmurHash3 reads them. */
function wordBytes(word: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeInt32LE(word);
  return bytes;
}
