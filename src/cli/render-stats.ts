import { KeyScope, NAMESPACE_COUNTERS, type NamespaceStatsView } from "../core/index.js";

const BAR_WIDTH = 30;

/**
 * renderStats draws a table per namespace: one row per rank with a usage bar
 * ('#' used, '+' reserved, '.' free), then the key counters ("keys per
 * rank" for a namespace of KEY_SCOPE_RANK, whose counts are each rank's).
 */
export function renderStats(namespaces: readonly NamespaceStatsView[]): string {
  if (namespaces.length === 0) return "no namespaces\n";
  const out: string[] = [];
  for (const ns of namespaces) {
    const counts = NAMESPACE_COUNTERS.map(({ field, label }) => `  ${label} ${ns[field]}`).join("");
    const scope = ns.keyScope === KeyScope.RANK ? "  keys per rank" : "";
    out.push(`namespace ${ns.namespace}  world_size ${ns.worldSize || "unknown"}${scope}${counts}`);
    out.push(`  ${"rank".padStart(5)}  ${"pages".padStart(11)}  ${"free".padStart(11)}  ${"reserved".padStart(11)}  ${"used".padStart(11)}  usage`);
    for (const r of ns.ranks) {
      out.push(
        `  ${String(r.rank).padStart(5)}  ${String(r.numPages).padStart(11)}  ${String(r.freePages).padStart(11)}  ${String(r.reservedPages).padStart(11)}  ${String(r.usedPages).padStart(11)}  [${bar(r.usedPages, r.reservedPages, r.usedPages + r.reservedPages + r.freePages)}]`,
      );
    }
  }
  return `${out.join("\n")}\n`;
}

/** bar draws the pages a rank holds, used, reserved and free (in a shard's store, its own part of them). */
function bar(used: number, reserved: number, total: number): string {
  if (total === 0) return ".".repeat(BAR_WIDTH);
  const u = Math.round((used / total) * BAR_WIDTH);
  const r = Math.min(BAR_WIDTH - u, Math.round((reserved / total) * BAR_WIDTH));
  return "#".repeat(u) + "+".repeat(r) + ".".repeat(BAR_WIDTH - u - r);
}
