import fc from "fast-check";
import { MetadataError } from "../../src/core/errors.js";
import { rankScopedName } from "../../src/core/key-scope.js";
import type { Namespace } from "../../src/core/namespace.js";
import type { MetadataState } from "../../src/core/state.js";
import { namespacesOf } from "../../src/core/state.js";
import type { FakeClock } from "./fake-clock.js";

/** The operations the property tests of the core draw: on namespace "" (kv), RANKS ranks of PAGES pages, keys k0 … k7. */
export const RANKS = 3;
export const PAGES = 3;
const key = fc.constantFrom("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7");
const keys = fc.array(key, { maxLength: 6 });
/**
 * prefixes say what a BatchAllocate gives as prefix keys: none, a chain
 * (each key's prefix the key before it, the first a root), or drawn keys
 * ("" a root; a key as its own prefix is refused).
 */
const prefixes = fc.oneof(fc.constant("none" as const), fc.constant("chain" as const), fc.array(fc.oneof(fc.constant(""), key), { maxLength: 6 }));
const rank = fc.integer({ min: 0, max: RANKS - 1 });
const page = fc.integer({ min: 0, max: PAGES - 1 });

export const operation = fc.oneof(
  fc.record({ op: fc.constant("cycle" as const), keys, prefixes }),
  fc.record({ op: fc.constant("confirmLapsed" as const), rank }),
  fc.record({ op: fc.constant("allocate" as const), rank, keys, prefixes }),
  fc.record({ op: fc.constant("confirmReserved" as const), rank, take: fc.nat(6), release: fc.array(page, { maxLength: 2 }) }),
  fc.record({ op: fc.constant("confirmAny" as const), rank, keys, pages: fc.array(page, { maxLength: 6 }) }),
  fc.record({ op: fc.constant("locate" as const), rank, keys, includeIncomplete: fc.boolean() }),
  fc.record({ op: fc.constant("delete" as const), keys }),
  fc.record({ op: fc.constant("clear" as const) }),
  fc.record({ op: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 1_500 }) }),
  fc.record({ op: fc.constant("evictAhead" as const), maxKeys: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ op: fc.constant("dropRank" as const), rank, numPages: fc.integer({ min: 1, max: PAGES }) }),
  fc.record({ op: fc.constant("resize" as const), rank, numPages: fc.integer({ min: 1, max: PAGES + 2 }) }),
  fc.record({ op: fc.constant("reset" as const), force: fc.boolean() }),
);

/** partOf is the namespace that holds rank r of "kv": "kv" itself, or, with KEY_SCOPE_RANK, rank r's own (key-scope.ts). */
export function partOf(state: MetadataState, r: number): Namespace {
  return namespacesOf(state).get("kv") ?? namespacesOf(state).get(rankScopedName("kv", r))!;
}

/** prefixKeysOf gives the prefix keys a drawn `prefixes` makes for keys. */
function prefixKeysOf(keys: readonly string[], drawn: "none" | "chain" | string[]): string[] {
  if (drawn === "none") return [];
  if (drawn === "chain") return keys.map((_, i) => (i === 0 ? "" : keys[i - 1]!));
  return keys.map((_, i) => drawn[i] ?? "");
}

/** Lease is a read lease the test saw granted; deleted once the test itself deleted the key. */
export type Lease = { key: string; rank: number; page: number; untilMs: number; deleted: boolean };

export type Operation = typeof operation extends fc.Arbitrary<infer T> ? T : never;

/** apply runs one drawn operation on the state; a lease the test saw granted goes into leases. */
export function apply(state: MetadataState, time: FakeClock, op: Operation, leases: Lease[]): void {
  const ranks = { get: (r: number) => partOf(state, r).ranks.get(r) };
  switch (op.op) {
    case "cycle":
      for (let r = 0; r < RANKS; r++) {
        const { pages } = state.batchAllocate("", r, op.keys, prefixKeysOf(op.keys, op.prefixes));
        const written = op.keys.filter((_, i) => pages[i]! >= 0);
        state.confirmWrite(
          "",
          r,
          written,
          pages.filter((p) => p >= 0),
        );
      }
      break;
    case "confirmLapsed": {
      const lapsed = [...ranks.get(op.rank)!.lapsed];
      state.confirmWrite(
        "",
        op.rank,
        lapsed.map(([, k]) => k),
        lapsed.map(([p]) => p),
      );
      break;
    }
    case "allocate":
      state.batchAllocate("", op.rank, op.keys, prefixKeysOf(op.keys, op.prefixes));
      break;
    case "confirmReserved": {
      const rank = ranks.get(op.rank)!;
      const holder = (page: number) => partOf(state, op.rank).keyOf(rank.reservedBy(page));
      const reserved = [...rank.reservations].slice(0, op.take);
      // A release names the key its page is reserved for, or, for a page that is not reserved, a key it is not.
      const releasing = op.release.map((page) => (rank.reservedBy(page) >= 0 ? holder(page) : "k0"));
      state.confirmWrite("", op.rank, reserved.map(holder), reserved, op.release, releasing);
      break;
    }
    case "confirmAny":
      state.confirmWrite("", op.rank, op.keys.slice(0, op.pages.length), op.pages.slice(0, op.keys.length));
      break;
    case "locate": {
      const pages = state.getLocations("", op.rank, op.keys, op.includeIncomplete);
      pages.forEach((p, i) => {
        if (p >= 0) leases.push({ key: op.keys[i]!, rank: op.rank, page: p, untilMs: time.nowMs + 700, deleted: false });
      });
      break;
    }
    case "delete":
      state.deleteKeys("", op.keys);
      for (const lease of leases) if ((op.keys as string[]).includes(lease.key)) lease.deleted = true;
      break;
    case "clear":
      state.clear("");
      for (const lease of leases) lease.deleted = true;
      break;
    case "advance":
      time.advance(op.ms);
      state.expire();
      break;
    case "evictAhead":
      state.evictAhead(op.maxKeys);
      break;
    case "resize":
      // InitializeRank again with another size: it grows, or shrinks when the pages past the new size are free (else refused).
      state.initializeRank("", op.rank, op.numPages, partOf(state, op.rank).worldSize, { keyScope: state.keyScopeOf("") });
      break;
    case "dropRank": {
      // Dropped and initialized again at once (with another size, perhaps), so that every rank is there for the next operation.
      const worldSize = partOf(state, op.rank).worldSize;
      const scope = state.keyScopeOf("");
      state.dropRank("", op.rank);
      state.initializeRank("", op.rank, op.numPages, worldSize, { keyScope: scope });
      // A dropped rank's leases go with it.
      for (let i = leases.length - 1; i >= 0; i--) if (leases[i]!.rank === op.rank) leases.splice(i, 1);
      break;
    }
    case "reset": {
      // Forgotten whole (refused while leases or reservations live, unless forced), then every rank initialized anew.
      const worldSize = partOf(state, 0).worldSize;
      const scope = state.keyScopeOf("");
      state.reset("", op.force);
      for (let r = 0; r < RANKS; r++) state.initializeRank("", r, PAGES, worldSize, { keyScope: scope });
      leases.length = 0;
      break;
    }
  }
}

/** applyAsCall applies an operation as a client's call would: a refused call (a MetadataError) changes nothing. */
export function applyAsCall(state: MetadataState, time: FakeClock, op: Operation): void {
  try {
    apply(state, time, op, []);
  } catch (e) {
    if (!(e instanceof MetadataError)) throw e;
  }
}
