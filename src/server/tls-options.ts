import { type NameOf, type OptionsOf, optionTable } from "../core/options.js";

/** TLS_OPTIONS are the PEM files of TLS on the port (tls-files.ts reads them). */
export const TLS_OPTIONS = optionTable({
  tlsCert: {
    kind: "string",
    default: "",
  },
  tlsKey: { kind: "string", default: "" },
  tlsClientCa: { kind: "string", default: "" },
});

/** TlsOptions are the PEM files of TLS on the port; "" for cleartext (TLS_OPTIONS). */
export type TlsOptions = OptionsOf<typeof TLS_OPTIONS>;

/** checkTls throws unless the TLS files go together. */
export function checkTls(options: TlsOptions, name: NameOf): void {
  if ((options.tlsCert === "") !== (options.tlsKey === "")) throw new RangeError(`${name("tlsCert")} and ${name("tlsKey")} go together`);
  if (options.tlsClientCa !== "" && options.tlsCert === "") throw new RangeError(`${name("tlsClientCa")} needs ${name("tlsCert")} and ${name("tlsKey")}`);
}
