import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** Certificates are PEM file paths made by openssl for a test. */
export interface Certificates {
  /** ca signs the server's certificate and the valid client certificate. */
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** otherCa signs otherClientCert (a client that another CA vouches for). */
  otherCa: string;
  otherClientCert: string;
  otherClientKey: string;
  /** expiredClientCert is signed by ca but expired. */
  expiredClientCert: string;
  expiredClientKey: string;
}

/** makeCertificates makes, in dir, two CAs, a server certificate for 127.0.0.1 and localhost, and client certificates. */
export function makeCertificates(dir: string): Certificates {
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const makeCa = (name: string) =>
    openssl("req", "-x509", ...newKey, "-keyout", at(`${name}.key`), "-out", at(`${name}.crt`), "-subj", `/CN=${name}`, "-days", "2");
  const sign = (name: string, ca: string, days: string, extensions?: string) => {
    openssl("req", ...newKey, "-keyout", at(`${name}.key`), "-out", at(`${name}.csr`), "-subj", `/CN=${name}`);
    const ext = extensions === undefined ? [] : ["-extfile", extensions];
    openssl(
      "x509",
      "-req",
      "-in",
      at(`${name}.csr`),
      "-CA",
      at(`${ca}.crt`),
      "-CAkey",
      at(`${ca}.key`),
      "-CAcreateserial",
      "-out",
      at(`${name}.crt`),
      "-days",
      days,
      ...ext,
    );
  };
  makeCa("ca");
  makeCa("other-ca");
  writeFileSync(at("server.ext"), "subjectAltName = IP:127.0.0.1, DNS:localhost\n");
  sign("server", "ca", "2", at("server.ext"));
  sign("client", "ca", "2");
  sign("other-client", "other-ca", "2");
  sign("expired-client", "ca", "-1"); // notAfter before notBefore: expired from the start
  return {
    ca: at("ca.crt"),
    serverCert: at("server.crt"),
    serverKey: at("server.key"),
    clientCert: at("client.crt"),
    clientKey: at("client.key"),
    otherCa: at("other-ca.crt"),
    otherClientCert: at("other-client.crt"),
    otherClientKey: at("other-client.key"),
    expiredClientCert: at("expired-client.crt"),
    expiredClientKey: at("expired-client.key"),
  };
}
