import { type NameOf, type OptionsOf, optionTable } from "../core/index.js";

/** TLS_OPTIONS are the PEM files of TLS on the port (tls-files.ts reads them). */
export const TLS_OPTIONS = optionTable({
  tlsCert: {
    flag: "tls-cert",
    kind: "string",
    default: "",
    help: "PEM certificate (chain) of TLS on the port, for every protocol; re-read on SIGHUP",
  },
  tlsKey: { flag: "tls-key", kind: "string", default: "", help: "PEM private key of --tls-cert" },
  tlsClientCa: { flag: "tls-client-ca", kind: "string", default: "", help: "PEM CA that client certificates must be signed by (mTLS)" },
});

/** TlsOptions are the PEM files of TLS on the port; "" for cleartext (TLS_OPTIONS). */
export type TlsOptions = OptionsOf<typeof TLS_OPTIONS>;

/** checkTls throws unless the TLS files go together. */
export function checkTls(options: TlsOptions, name: NameOf): void {
  if ((options.tlsCert === "") !== (options.tlsKey === "")) throw new RangeError(`${name("tlsCert")} and ${name("tlsKey")} go together`);
  if (options.tlsClientCa !== "" && options.tlsCert === "") throw new RangeError(`${name("tlsClientCa")} needs ${name("tlsCert")} and ${name("tlsKey")}`);
}
