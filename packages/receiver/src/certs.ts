import { readFileSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import selfsigned from "selfsigned";

/**
 * A self-signed certificate for local HTTPS receivers (demo, tests, benchmark), valid for
 * localhost, 127.0.0.1 and ::1. Senders trust it through Node's NODE_EXTRA_CA_CERTS, which is
 * read once at process start: create it before starting the process that must trust it.
 */
export interface LocalCertificate {
  key: string;
  cert: string;
  /** Path of the PEM certificate, for NODE_EXTRA_CA_CERTS. */
  certPath: string;
}

/** Creates (or reuses, when both files exist) `dir/localhost.crt` and `dir/localhost.key`. */
export async function ensureLocalCertificate(dir: string): Promise<LocalCertificate> {
  const certPath = path.join(dir, "localhost.crt");
  const keyPath = path.join(dir, "localhost.key");
  try {
    return { cert: await readFile(certPath, "utf8"), key: await readFile(keyPath, "utf8"), certPath };
  } catch {
    // Not there yet: make one.
  }
  const notAfter = new Date();
  notAfter.setFullYear(notAfter.getFullYear() + 1);
  const pems = await selfsigned.generate([{ name: "commonName", value: "localhost" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notAfterDate: notAfter,
    extensions: [
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", digitalSignature: true, keyCertSign: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 2, value: "localhost" },
          { type: 7, ip: "127.0.0.1" },
          { type: 7, ip: "::1" },
        ],
      },
    ],
  });
  await mkdir(dir, { recursive: true });
  await writeFile(keyPath, pems.private, { mode: 0o600 });
  await writeFile(certPath, pems.cert);
  return { cert: pems.cert, key: pems.private, certPath };
}

/**
 * The certificate `npm test` and `npm run test:unit` made before jest started (scripts/test.mjs:
 * the folder TEST_CERT_DIR), which the test process and the services it starts trust through
 * NODE_EXTRA_CA_CERTS.
 * @throws Error when TEST_CERT_DIR is not set (jest run directly).
 */
export function testCertificate(): LocalCertificate {
  const dir = process.env.TEST_CERT_DIR;
  if (!dir) throw new Error("run the tests with `npm test` or `npm run test:unit` (they prepare the receivers' certificate)");
  const certPath = path.join(dir, "localhost.crt");
  return { cert: readFileSync(certPath, "utf8"), key: readFileSync(path.join(dir, "localhost.key"), "utf8"), certPath };
}
