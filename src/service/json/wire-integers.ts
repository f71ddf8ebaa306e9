import { type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { checkInt32, checkUint32 } from "../../core/index.js";

/** CHECKS are the range checks of the 32-bit integer types a request's fields have. */
const CHECKS: Partial<Record<ScalarType, (value: number, field: string) => void>> = {
  [ScalarType.UINT32]: checkUint32,
  [ScalarType.INT32]: checkInt32,
  [ScalarType.FIXED32]: checkUint32,
  [ScalarType.SFIXED32]: checkInt32,
  [ScalarType.SINT32]: checkInt32,
};

/**
 * checkWireIntegers throws INVALID_ARGUMENT naming the field when a
 * number a JSON body gave a request's 32-bit integer field (or an element
 * of a repeated one) does not fit its type. Encoded, such a number would
 * wrap (rank 2^32 is rank 0, -1 is 4294967295), so a relay, which encodes
 * what it translates, must refuse it as the server does; both run this.
 */
export function checkWireIntegers(schema: DescMessage, message: Record<string, unknown>): void {
  for (const field of schema.fields) {
    const scalar = field.fieldKind === "scalar" ? field.scalar : field.fieldKind === "list" && field.listKind === "scalar" ? field.scalar : undefined;
    const check = scalar === undefined ? undefined : CHECKS[scalar];
    const value = message[field.localName];
    if (check === undefined || value === undefined) continue;
    if (Array.isArray(value)) for (let i = 0; i < value.length; i++) check(value[i] as number, `${field.name}[${i}]`);
    else check(value as number, field.name);
  }
}
