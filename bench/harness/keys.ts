/** benchKey is the i-th key of a benchmark: 64 hex characters, like a KV-cache block hash; salt separates key spaces. */
export function benchKey(i: number, salt = 0): string {
  return `${salt.toString(16).padStart(8, "0")}${i.toString(16).padStart(56, "0")}`;
}
