import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";
import { mersenne } from "pure-rand/generator/mersenne";

/** seededRandom is a generator of numbers in [0, 1) from a seed (pure-rand's Mersenne Twister): the same seed, the same numbers, so a randomized run can be replayed. */
export function seededRandom(seed: number): () => number {
  const generator = mersenne(seed);
  return () => uniformFloat64(generator);
}
