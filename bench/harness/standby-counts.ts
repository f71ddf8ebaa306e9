/** StandbyCounts are a member's standby reads by outcome (StandbyReads): answered there, passed on for lag, passed on for a position not applied yet. */
export interface StandbyCounts {
  local: number;
  lagging: number;
  behind: number;
}

/** standbyCounts reads a member's standby reads by outcome from its /metrics (hf3fs_metadata_standby_reads_total). */
export async function standbyCounts(url: string): Promise<StandbyCounts> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const counts: StandbyCounts = { local: 0, lagging: 0, behind: 0 };
  for (const [, outcome, value] of text.matchAll(/^hf3fs_metadata_standby_reads_total\{outcome="(\w+)"\} (\d+)$/gm))
    counts[outcome as keyof StandbyCounts] = Number(value);
  return counts;
}
