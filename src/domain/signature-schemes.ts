/**
 * How a webhook connection's deliveries are signed: `config.signature` of
 * the connection, `{ scheme, header? }`. Absent means `auto`.
 */

/** The signature schemes a webhook connection may name (docs/webhooks.md, "Signing"). */
export const SIGNATURE_SCHEMES = [
  "auto",
  "hmac-sha256-hex",
  "github",
  "standard-webhooks",
  "stripe",
  "shopify",
  "slack",
] as const;

export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

/** A webhook connection's `config.signature`. */
export interface WebhookSignature {
  scheme: SignatureScheme;
  /**
   * `hmac-sha256-hex` only: the header carrying the signature instead of
   * `X-Webhook-Signature` (any case; a header field name of 1 to 100 characters).
   */
  header?: string;
}

/** What a connection without `config.signature` (or with an unreadable one) verifies with: today's schemes. */
export const AUTO_SIGNATURE: Readonly<WebhookSignature> = Object.freeze({ scheme: "auto" });

/** An HTTP header field name (RFC 9110 token). */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;

/**
 * Why `value` is not a valid `config.signature` (`{ scheme, header? }`), with
 * the JSON path (below `$.config.signature`) of the problem, or null when it is valid.
 * An unknown scheme is named in the message (cut to 100 characters).
 */
export function signatureProblem(value: unknown): { path: string; message: string } | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return {
      path: "",
      message: `signature is an object { scheme, header? }; scheme one of ${SIGNATURE_SCHEMES.join(", ")}`,
    };
  }
  const fields = value as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    if (key !== "scheme" && key !== "header") return { path: `.${key}`, message: "unknown field" };
  }
  const { scheme, header } = fields;
  if (typeof scheme !== "string" || !(SIGNATURE_SCHEMES as readonly string[]).includes(scheme)) {
    const named =
      typeof scheme === "string"
        ? `unknown signature scheme ${JSON.stringify(scheme.slice(0, 100))}`
        : "scheme is a string";
    return { path: ".scheme", message: `${named}; one of ${SIGNATURE_SCHEMES.join(", ")}` };
  }
  if (header !== undefined) {
    if (scheme !== "hmac-sha256-hex")
      return { path: ".header", message: "only the hmac-sha256-hex scheme takes a header" };
    if (typeof header !== "string" || !HEADER_NAME.test(header)) {
      return { path: ".header", message: "header is an HTTP header name of 1 to 100 characters" };
    }
  }
  return null;
}

/**
 * The signature of a stored config value: `AUTO_SIGNATURE` when it is absent
 * or not valid (the admin API and the fixture loader refuse invalid ones, so
 * only a store written by other means holds one). Every scheme, `auto`
 * included, needs a valid HMAC made with the connection's secret.
 */
export function signatureOf(value: unknown): Readonly<WebhookSignature> {
  if (value === undefined || value === null || signatureProblem(value) !== null) return AUTO_SIGNATURE;
  const { scheme, header } = value as WebhookSignature;
  if (scheme === "auto" && header === undefined) return AUTO_SIGNATURE;
  return Object.freeze(header === undefined ? { scheme } : { scheme, header });
}
