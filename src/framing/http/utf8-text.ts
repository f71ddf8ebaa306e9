import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";

/**
 * keepLeadingByteOrderMark makes protobuf-es decode strings exactly. By
 * default it decodes with a TextDecoder, which drops a leading U+FEFF (it
 * takes it for a byte order mark), so the key "\uFEFFk" would arrive as "k"
 * through connect-node but intact through the gRPC fast path's codecs (and
 * from every other protobuf runtime). U+FEFF is a character like any other
 * in a proto3 string. Process-wide and idempotent; the server calls it
 * before it serves.
 */
export function keepLeadingByteOrderMark(): void {
  const { encodeUtf8, checkUtf8 } = getTextEncoding();
  const loose = new TextDecoder("utf-8", { ignoreBOM: true });
  const strict = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true });
  configureTextEncoding({ encodeUtf8, checkUtf8, decodeUtf8: (bytes, isStrict) => (isStrict ? strict : loose).decode(bytes) });
}
