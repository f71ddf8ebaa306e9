/**
 * The core's light face: what a command's options need of the core (the
 * option tables, the state's options, the namespace rule), importing no
 * generated code, so that a starting process binds its port before it
 * loads protobuf-es and the rest of the core (test/unit/cli/start-imports.test.ts).
 * Everything here is also on the full face, core/index.ts.
 */
export { namespaceProblem } from "./namespace-name.js";
export {
  checkBounds,
  defaultsOf,
  definedOf,
  type NameOf,
  type OptionKind,
  type OptionSpec,
  type OptionsOf,
  type OptionTable,
  optionTable,
} from "./option-table.js";
export { checkShard, checkWatermarks, DEFAULT_NAMESPACE, defaultStateOptions, STATE_OPTIONS, type StateOptions } from "./state-options.js";
