import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import {
  BatchAllocateRequestSchema,
  BatchAllocateResponseSchema,
  BatchExistsRequestSchema,
  ConfirmWriteRequestSchema,
  GetLocationsRequestSchema,
  GetLocationsResponseSchema,
  InitializeRankRequestSchema,
  MetadataService,
} from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { LeanGrpc } from "./lean-grpc.js";
import { batchAllocateFrame, batchExistsFrame, confirmWriteFrame, getLocationsFrame } from "./request-frames.js";

/** CycleClient is what a virtual worker of the cycle workload needs, over any transport. */
export interface CycleClient {
  init(namespace: string, rank: number, numPages: number): Promise<void>;
  allocate(namespace: string, rank: number, keys: string[], prefixKeys: string[]): Promise<number[]>;
  confirm(namespace: string, rank: number, keys: string[], pages: number[]): Promise<void>;
  exists(namespace: string, keys: string[]): Promise<void>;
  locate(namespace: string, rank: number, keys: string[]): Promise<void>;
  close(): void;
}

export const TRANSPORTS = ["lean-grpc", "connect-grpc", "grpc-js", "connect-binary", "connect-json", "vllm-json", "ts-client", "ts-client-alone"] as const;
export type TransportName = (typeof TRANSPORTS)[number];

const path = (method: string) => `/${MetadataService.typeName}/${method}`;

/** cycleClient builds the client of a transport. */
export function cycleClient(transport: TransportName, url: string): CycleClient {
  switch (transport) {
    case "lean-grpc":
      return leanClient(url);
    case "grpc-js":
      return grpcJsClient(url);
    case "vllm-json":
      return vllmClient(url);
    case "ts-client":
    case "ts-client-alone":
      return tsClient(url, transport === "ts-client-alone");
    default: {
      const t =
        transport === "connect-grpc"
          ? createGrpcTransport({ baseUrl: url })
          : createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: transport === "connect-binary" });
      const client = createClient(MetadataService, t);
      return {
        init: async (namespace, rank, numPages) => void (await client.initializeRank({ namespace, rank, numPages, worldSize: 1 })),
        allocate: async (namespace, rank, keys, prefixKeys) => (await client.batchAllocate({ namespace, rank, keys, prefixKeys })).pages,
        confirm: async (namespace, rank, keys, pages) => void (await client.confirmWrite({ namespace, rank, keys, pages })),
        exists: async (namespace, keys) => void (await client.batchExists({ namespace, keys })),
        locate: async (namespace, rank, keys) => void (await client.getLocations({ namespace, rank, keys })),
        close: () => undefined,
      };
    }
  }
}

function leanClient(url: string): CycleClient {
  const lean = new LeanGrpc(url);
  return {
    init: async (namespace, rank, numPages) =>
      void (await lean.call(
        path("InitializeRank"),
        toBinary(InitializeRankRequestSchema, create(InitializeRankRequestSchema, { namespace, rank, numPages, worldSize: 1 })),
      )),
    allocate: async (namespace, rank, keys, prefixKeys) =>
      fromBinary(BatchAllocateResponseSchema, await lean.callFramed(path("BatchAllocate"), batchAllocateFrame(namespace, rank, keys, prefixKeys))).pages,
    confirm: async (namespace, rank, keys, pages) => void (await lean.callFramed(path("ConfirmWrite"), confirmWriteFrame(namespace, rank, keys, pages))),
    exists: async (namespace, keys) => void (await lean.callFramed(path("BatchExists"), batchExistsFrame(namespace, keys))),
    locate: async (namespace, rank, keys) =>
      void fromBinary(GetLocationsResponseSchema, await lean.callFramed(path("GetLocations"), getLocationsFrame(namespace, rank, keys))),
    close: () => lean.close(),
  };
}

function grpcJsClient(url: string): CycleClient {
  const client = new grpc.Client(url.replace("http://", ""), grpc.credentials.createInsecure());
  const unary = <T>(method: string, bytes: Uint8Array, decode: (b: Buffer) => T) =>
    new Promise<T>((resolve, reject) =>
      client.makeUnaryRequest(
        path(method),
        (b: Uint8Array) => Buffer.from(b),
        decode,
        bytes,
        (err, value) => (err ? reject(err) : resolve(value!)),
      ),
    );
  const raw = (b: Buffer) => b;
  return {
    init: async (namespace, rank, numPages) =>
      void (await unary(
        "InitializeRank",
        toBinary(InitializeRankRequestSchema, create(InitializeRankRequestSchema, { namespace, rank, numPages, worldSize: 1 })),
        raw,
      )),
    allocate: async (namespace, rank, keys, prefixKeys) =>
      (
        await unary("BatchAllocate", toBinary(BatchAllocateRequestSchema, create(BatchAllocateRequestSchema, { namespace, rank, keys, prefixKeys })), (b) =>
          fromBinary(BatchAllocateResponseSchema, b),
        )
      ).pages,
    confirm: async (namespace, rank, keys, pages) =>
      void (await unary("ConfirmWrite", toBinary(ConfirmWriteRequestSchema, create(ConfirmWriteRequestSchema, { namespace, rank, keys, pages })), raw)),
    exists: async (namespace, keys) =>
      void (await unary("BatchExists", toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { namespace, keys })), raw)),
    locate: async (namespace, rank, keys) =>
      void (await unary("GetLocations", toBinary(GetLocationsRequestSchema, create(GetLocationsRequestSchema, { namespace, rank, keys })), raw)),
    close: () => client.close(),
  };
}

/** tsClient is the package's client, its calls gathered into Batches; `alone` gives each call options (no header), which keep it out of them. */
function tsClient(url: string, alone: boolean): CycleClient {
  const client = createMetadataClient({ baseUrl: url });
  const o = alone ? { headers: {} } : undefined;
  return {
    init: async (namespace, rank, numPages) => void (await client.initializeRank({ namespace, rank, numPages, worldSize: 1 })),
    allocate: async (namespace, rank, keys, prefixKeys) => (await client.batchAllocate({ namespace, rank, keys, prefixKeys }, o)).pages,
    confirm: async (namespace, rank, keys, pages) => void (await client.confirmWrite({ namespace, rank, keys, pages }, o)),
    exists: async (namespace, keys) => void (await client.batchExists({ namespace, keys }, o)),
    locate: async (namespace, rank, keys) => void (await client.getLocations({ namespace, rank, keys }, o)),
    close: () => undefined,
  };
}

function vllmClient(url: string): CycleClient {
  const post = async (route: string, body: unknown) => {
    const res = await fetch(`${url}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    if (res.status >= 300) throw new Error(`${route}: HTTP ${res.status} ${await res.text()}`);
    return res.status === 204 ? undefined : ((await res.json()) as Record<string, unknown>);
  };
  return {
    init: async (namespace, rank, numPages) => void (await post(`/rank/${rank}/initialize`, { num_pages: numPages, namespace })),
    allocate: async (namespace, rank, keys, prefixKeys) =>
      ((await post("/keys/batch_allocate", { rank, namespace, keys: keys.map((k, i) => [k, prefixKeys[i]]) }))!.results as [string, number][]).map(
        ([, p]) => p,
      ),
    confirm: async (namespace, rank, keys, pages) =>
      void (await post("/keys/confirm_write", { rank, namespace, confirmations: keys.map((k, i) => [k, pages[i]]) })),
    exists: async (namespace, keys) => void (await post("/keys/batch_exists", { namespace, keys })),
    locate: async (namespace, rank, keys) => void (await post("/keys/get_locations", { rank, namespace, keys })),
    close: () => undefined,
  };
}
