/**
 * GeoJSON as RFC 7946 defines it, checked where a host stores a layer (a
 * memory connection's `layers`): what is stored is served untouched, so it
 * must be valid when it comes in. The first problem is named by its path
 * inside the FeatureCollection (`features[3].geometry.coordinates[0]`).
 * Foreign members are allowed (RFC 7946 §6.1); a polygon's winding order is
 * not checked (§3.1.6: parsers should not reject it).
 */

/** Where a FeatureCollection first breaks RFC 7946, and how. */
export interface GeoJsonProblem {
  /** The path inside the collection (`features[3].geometry.coordinates[0]`), "" for the collection itself. */
  path: string;
  message: string;
}

const GEOMETRY_TYPES = [
  "Point",
  "MultiPoint",
  "LineString",
  "MultiLineString",
  "Polygon",
  "MultiPolygon",
  "GeometryCollection",
];

/** The first RFC 7946 problem of a FeatureCollection, or null when it is valid. */
export function featureCollectionProblem(value: unknown): GeoJsonProblem | null {
  try {
    checkFeatureCollection(value);
    return null;
  } catch (error) {
    if (error instanceof Invalid) return { path: error.path, message: error.message };
    throw error;
  }
}

class Invalid extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

function at(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return path === "" ? key : `${path}.${key}`;
}

function checkFeatureCollection(value: unknown): void {
  if (!isObject(value)) throw new Invalid("", "a FeatureCollection is a JSON object");
  if (value.type !== "FeatureCollection") throw new Invalid("type", 'must be "FeatureCollection"');
  if (!Array.isArray(value.features)) throw new Invalid("features", "must be an array of Features");
  checkBbox(value.bbox, "bbox");
  value.features.forEach((feature, i) => checkFeature(feature, at("features", i)));
}

function checkFeature(value: unknown, path: string): void {
  if (!isObject(value)) throw new Invalid(path, "a Feature is a JSON object");
  if (value.type !== "Feature") throw new Invalid(at(path, "type"), 'must be "Feature"');
  if (!("geometry" in value)) throw new Invalid(at(path, "geometry"), "is required (a geometry object or null)");
  if (value.geometry !== null) checkGeometry(value.geometry, at(path, "geometry"));
  if (!("properties" in value)) throw new Invalid(at(path, "properties"), "is required (an object or null)");
  if (value.properties !== null && !isObject(value.properties)) {
    throw new Invalid(at(path, "properties"), "must be an object or null");
  }
  if ("id" in value && typeof value.id !== "string" && !(typeof value.id === "number" && Number.isFinite(value.id))) {
    throw new Invalid(at(path, "id"), "must be a string or a number");
  }
  checkBbox(value.bbox, at(path, "bbox"));
}

function checkGeometry(value: unknown, path: string): void {
  if (!isObject(value)) throw new Invalid(path, "a geometry is a JSON object (or null)");
  const type = value.type;
  if (typeof type !== "string" || !GEOMETRY_TYPES.includes(type)) {
    throw new Invalid(at(path, "type"), `must be one of ${GEOMETRY_TYPES.join(", ")}`);
  }
  checkBbox(value.bbox, at(path, "bbox"));
  if (type === "GeometryCollection") {
    if (!Array.isArray(value.geometries)) throw new Invalid(at(path, "geometries"), "must be an array of geometries");
    value.geometries.forEach((geometry, i) => checkGeometry(geometry, at(at(path, "geometries"), i)));
    return;
  }
  const coordinatesPath = at(path, "coordinates");
  if (!("coordinates" in value)) throw new Invalid(coordinatesPath, `is required for a ${type}`);
  const coordinates = value.coordinates;
  switch (type) {
    case "Point":
      return checkPosition(coordinates, coordinatesPath);
    case "MultiPoint":
      return eachOf(coordinates, coordinatesPath, "positions", checkPosition);
    case "LineString":
      return checkLine(coordinates, coordinatesPath);
    case "MultiLineString":
      return eachOf(coordinates, coordinatesPath, "LineString coordinates", checkLine);
    case "Polygon":
      return checkPolygon(coordinates, coordinatesPath);
    default:
      return eachOf(coordinates, coordinatesPath, "Polygon coordinates", checkPolygon);
  }
}

/** Two or three numbers: longitude, latitude and an optional altitude. */
function checkPosition(value: unknown, path: string): void {
  if (!Array.isArray(value) || value.length < 2 || value.length > 3) {
    throw new Invalid(path, "a position is an array of 2 or 3 numbers (longitude, latitude, altitude)");
  }
  value.forEach((n, i) => {
    if (typeof n !== "number" || !Number.isFinite(n)) throw new Invalid(at(path, i), "must be a finite number");
  });
}

function checkLine(value: unknown, path: string): void {
  eachOf(value, path, "positions", checkPosition);
  if ((value as unknown[]).length < 2) throw new Invalid(path, "a LineString has 2 or more positions");
}

/** Linear rings: closed (the last position equals the first), 4 or more positions each. */
function checkPolygon(value: unknown, path: string): void {
  eachOf(value, path, "linear rings", (ring, ringPath) => {
    eachOf(ring, ringPath, "positions", checkPosition);
    const positions = ring as number[][];
    if (positions.length < 4) throw new Invalid(ringPath, "a linear ring has 4 or more positions");
    const first = positions[0]!;
    const last = positions.at(-1)!;
    if (first.length !== last.length || first.some((n, i) => n !== last[i])) {
      throw new Invalid(ringPath, "ring is not closed (its last position must equal its first)");
    }
  });
}

function eachOf(value: unknown, path: string, what: string, check: (item: unknown, path: string) => void): void {
  if (!Array.isArray(value)) throw new Invalid(path, `must be an array of ${what}`);
  value.forEach((item, i) => check(item, at(path, i)));
}

/** A bounding box, when present: 2×n numbers (n = 2 or 3); west may exceed east (a box across the antimeridian). */
function checkBbox(value: unknown, path: string): void {
  if (value === undefined) return;
  const numbers = Array.isArray(value) && value.every((n) => typeof n === "number" && Number.isFinite(n));
  if (!numbers || (value.length !== 4 && value.length !== 6)) {
    throw new Invalid(path, "a bbox is an array of 4 or 6 numbers");
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
