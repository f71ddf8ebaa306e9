/** varintLength is the size of a uint32 as a protobuf varint. (A negative int32 is sign-extended to 64 bits: 10 bytes.) */
export function varintLength(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x20_0000 ? 3 : value < 0x1000_0000 ? 4 : 5;
}
