import { ApiError, invalidBody } from "../errors.js";

export const payloadTooLarge = (limit: number) =>
  new ApiError(413, "payload_too_large", `request body is larger than ${limit} bytes`, { details: { limit } });

/** Concatenate chunks, refusing more than `limit` bytes. */
export async function readLimited(chunks: AsyncIterable<Uint8Array>, limit: number, onTooLarge?: () => void): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    size += chunk.byteLength;
    if (size > limit) {
      onTooLarge?.();
      throw payloadTooLarge(limit);
    }
    parts.push(chunk);
  }
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/** Refuse early on a declared Content-Length over the limit. */
export function checkDeclaredLength(contentLength: string | null, limit: number): void {
  if (contentLength !== null && Number(contentLength) > limit) throw payloadTooLarge(limit);
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/** `application/json` or any `+json` type. */
export function isJsonType(contentType: string | null): boolean {
  if (!contentType) return false;
  if (contentType === "application/json") return true; // what nearly every sender writes: no parsing
  const type = contentType.split(";", 1)[0]!.trim().toLowerCase();
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

export function isFormType(contentType: string | null): boolean {
  return !!contentType && contentType.split(";", 1)[0]!.trim().toLowerCase() === "application/x-www-form-urlencoded";
}

export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw invalidBody("body is not valid UTF-8");
  }
}

/**
 * Parse a JSON body that must be an object. JSON.parse defines `__proto__`
 * as an own data property, never a prototype, so payload keys are inert.
 */
export function parseJsonObject(bytes: Uint8Array): Record<string, unknown> {
  if (bytes.byteLength === 0) throw invalidBody("body is empty; send a JSON object");
  const value = parseJsonValue(bytes);
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw invalidBody("body must be a JSON object");
  return value as Record<string, unknown>;
}

/** Parse a JSON body of any shape (400 invalid_body when it is not JSON). Every JSON body goes through here. */
export function parseJsonValue(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) throw invalidBody("body is empty; send JSON");
  try {
    return JSON.parse(decodeUtf8(bytes));
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw invalidBody("body is not valid JSON");
  }
}
