#!/usr/bin/env node
// hf3fs-metadata: runs the TypeScript entry point through tsx's loader.
import { register } from "tsx/esm/api";

register();
await import("./main.ts");
