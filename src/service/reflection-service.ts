import { createRegistry, type DescFile, type MessageInitShape, type Registry, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import type { ServerReflection as ReflectionV1, ServerReflectionRequest, ServerReflectionResponseSchema } from "../../gen/grpc/reflection/v1/reflection_pb.js";

type Request = Pick<ServerReflectionRequest, "host" | "messageRequest">;
/** Answer is a response's oneof as a plain init (no $typeName), so it fits v1 and v1alpha alike. */
type Answer = NonNullable<MessageInitShape<typeof ServerReflectionResponseSchema>["messageResponse"]>;

/**
 * reflectionService implements gRPC server reflection (grpc.reflection.v1;
 * v1alpha has the same messages under another package, so the same object
 * serves both) for the services of `files`: tools like buf curl and grpcurl
 * list the services and fetch their descriptors without a local schema.
 */
export function reflectionService(files: readonly DescFile[], serviceNames: readonly string[]): ServiceImpl<typeof ReflectionV1> {
  const registry = createRegistry(...files);
  const byName = new Map(files.map((f) => [f.proto.name, f]));
  return {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        const { host, messageRequest } = request;
        yield { validHost: "", originalRequest: { host, messageRequest }, messageResponse: answer(registry, byName, serviceNames, request) };
      }
    },
  };
}

function answer(registry: Registry, byName: ReadonlyMap<string, DescFile>, serviceNames: readonly string[], request: Request): Answer {
  const question = request.messageRequest;
  switch (question.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: serviceNames.map((name) => ({ name })) } };
    case "fileByFilename":
      return filesAnswer(byName.get(question.value), `no file "${question.value}"`);
    case "fileContainingSymbol":
      return filesAnswer(fileOfSymbol(registry, question.value), `no symbol "${question.value}"`);
    case "fileContainingExtension":
      return errorAnswer(Code.NotFound, `no extension ${question.value.extensionNumber} of "${question.value.containingType}"`);
    case "allExtensionNumbersOfType":
      if (registry.getMessage(question.value) === undefined) return errorAnswer(Code.NotFound, `no message type "${question.value}"`);
      return { case: "allExtensionNumbersResponse", value: { baseTypeName: question.value, extensionNumber: [] } };
    default:
      return errorAnswer(Code.InvalidArgument, "empty reflection request");
  }
}

/** fileOfSymbol finds the file declaring a message, enum, service, or a service's method ("pkg.Service.Method"). */
function fileOfSymbol(registry: Registry, symbol: string): DescFile | undefined {
  const desc = registry.get(symbol);
  if (desc !== undefined) return desc.file;
  const service = registry.getService(symbol.slice(0, symbol.lastIndexOf(".")));
  return service?.file;
}

/** filesAnswer sends a file with all its dependencies, each serialized. */
function filesAnswer(file: DescFile | undefined, notFound: string): Answer {
  if (file === undefined) return errorAnswer(Code.NotFound, notFound);
  const all = new Set<DescFile>();
  const visit = (f: DescFile) => {
    if (all.has(f)) return;
    all.add(f);
    f.dependencies.forEach(visit);
  };
  visit(file);
  return {
    case: "fileDescriptorResponse",
    value: { fileDescriptorProto: [...all].map((f) => toBinary(FileDescriptorProtoSchema, f.proto)) },
  };
}

function errorAnswer(code: Code, message: string): Answer {
  return { case: "errorResponse", value: { errorCode: code, errorMessage: message } };
}
