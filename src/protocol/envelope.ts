/** ENVELOPE_BYTES is the gRPC and Connect framing around a message (flags and length), allowed on top of the body limit. */
export const ENVELOPE_BYTES = 5;
