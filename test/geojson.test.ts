import { describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { featureCollectionProblem } from "../src/domain/geojson.js";
import { FixtureError, parseFixture } from "../src/fixture/load.js";
import { setup } from "./support/api.js";
import { ADMIN_TOKEN, type AdminSend, functionAdmin, httpAdmin } from "./support/admin.js";
import { testFixture } from "./support/fixture.js";

const square = [
  [0, 0],
  [1, 0],
  [1, 1],
  [0, 1],
  [0, 0],
];
const point = (coordinates: unknown) => ({ type: "Feature", geometry: { type: "Point", coordinates }, properties: {} });
const collection = (...features: unknown[]) => ({ type: "FeatureCollection", features });

describe("RFC 7946 FeatureCollections", () => {
  it("accepts every geometry type, null geometries and properties, ids, bboxes, altitudes and foreign members", () => {
    const valid = collection(
      point([4.83, 45.76]),
      point([4.83, 45.76, 170]),
      { type: "Feature", id: "a", geometry: null, properties: null },
      {
        type: "Feature",
        id: 7,
        bbox: [0, 0, 1, 1],
        geometry: {
          type: "MultiPoint",
          coordinates: [
            [0, 0],
            [1, 1],
          ],
        },
        properties: { x: 1 },
      },
      {
        type: "Feature",
        geometry: {
          type: "LineString",
          coordinates: [
            [0, 0],
            [1, 1],
          ],
        },
        properties: {},
      },
      {
        type: "Feature",
        geometry: {
          type: "MultiLineString",
          coordinates: [
            [
              [0, 0],
              [1, 1],
            ],
            [
              [2, 2],
              [3, 3],
            ],
          ],
        },
        properties: {},
      },
      {
        type: "Feature",
        geometry: {
          type: "Polygon",
          coordinates: [
            square,
            [
              [0.2, 0.2],
              [0.8, 0.2],
              [0.8, 0.8],
              [0.2, 0.2],
            ],
          ],
        },
        properties: {},
      },
      { type: "Feature", geometry: { type: "MultiPolygon", coordinates: [[square], [square]] }, properties: {} },
      {
        type: "Feature",
        geometry: { type: "GeometryCollection", geometries: [{ type: "Point", coordinates: [0, 0] }] },
        properties: {},
        title: "x",
      },
    );
    expect(featureCollectionProblem(valid)).toBeNull();
    expect(featureCollectionProblem({ ...collection(), crs: { type: "name" }, bbox: [170, -10, -170, 10] })).toBeNull();
  });

  it("names the first problem by its path", () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [[], "", /JSON object/],
      [{ type: "Feature" }, "type", /FeatureCollection/],
      [{ type: "FeatureCollection" }, "features", /array/],
      [collection(point([0, 0]), { type: "Feature", properties: {} }), "features[1].geometry", /required/],
      [
        collection({ type: "Feature", geometry: { type: "Point" }, properties: {} }),
        "features[0].geometry.coordinates",
        /required for a Point/,
      ],
      [collection(point([0])), "features[0].geometry.coordinates", /2 or 3 numbers/],
      [collection(point([0, 0, 0, 0])), "features[0].geometry.coordinates", /2 or 3 numbers/],
      [collection(point([0, "1"])), "features[0].geometry.coordinates[1]", /finite number/],
      [
        collection({ type: "Feature", geometry: { type: "Circle", coordinates: [0, 0] }, properties: {} }),
        "features[0].geometry.type",
        /one of Point/,
      ],
      [collection({ type: "Feature", geometry: point([0, 0]).geometry }), "features[0].properties", /required/],
      [collection({ type: "Feature", geometry: null, properties: [] }), "features[0].properties", /object or null/],
      [
        collection({ type: "Feature", id: true, geometry: null, properties: null }),
        "features[0].id",
        /string or a number/,
      ],
      [
        collection({ type: "Feature", geometry: { type: "LineString", coordinates: [[0, 0]] }, properties: {} }),
        "features[0].geometry.coordinates",
        /2 or more/,
      ],
      [
        collection(point([0, 0]), point([0, 0]), point([0, 0]), {
          type: "Feature",
          geometry: {
            type: "Polygon",
            coordinates: [
              [
                [0, 0],
                [1, 0],
                [1, 1],
                [0, 1],
              ],
            ],
          },
          properties: {},
        }),
        "features[3].geometry.coordinates[0]",
        /^ring is not closed/,
      ],
      [
        collection({
          type: "Feature",
          geometry: {
            type: "Polygon",
            coordinates: [
              [
                [0, 0],
                [1, 1],
                [0, 0],
              ],
            ],
          },
          properties: {},
        }),
        "features[0].geometry.coordinates[0]",
        /4 or more/,
      ],
      [
        collection({
          type: "Feature",
          geometry: {
            type: "MultiPolygon",
            coordinates: [
              [square],
              [
                [
                  [0, 0],
                  [1, 0],
                  [1, 1],
                  [0, 1],
                  [0, 0.5],
                ],
              ],
            ],
          },
          properties: {},
        }),
        "features[0].geometry.coordinates[1][0]",
        /not closed/,
      ],
      [
        collection({
          type: "Feature",
          geometry: { type: "GeometryCollection", geometries: [{ type: "Point" }] },
          properties: {},
        }),
        "features[0].geometry.geometries[0].coordinates",
        /required/,
      ],
      [{ ...collection(), bbox: [0, 0, 1] }, "bbox", /4 or 6 numbers/],
    ];
    for (const [value, path, message] of cases) {
      const problem = featureCollectionProblem(value);
      expect(problem, path).not.toBeNull();
      expect(problem!.path, JSON.stringify(value)).toBe(path);
      expect(problem!.message, path).toMatch(message);
    }
  });
});

for (const via of ["function", "http"] as const) {
  describe(`a memory layer stored through the ${via}`, () => {
    it("is refused with 422 naming the first problem (an unclosed ring, a Point without coordinates), storing nothing", async () => {
      const ctx = await setup({ adminToken: ADMIN_TOKEN });
      const send: AdminSend = via === "http" ? httpAdmin(ctx.api) : functionAdmin(createAdmin(ctx.api));
      const put = (featureCollection: unknown) =>
        send("PUT", "/connections/conn_layer", {
          teamId: "team_ops",
          name: "Layer",
          type: "memory",
          config: { layers: { zones: { featureCollection } } },
        });
      const open = {
        type: "Feature",
        geometry: {
          type: "Polygon",
          coordinates: [
            [
              [0, 0],
              [1, 0],
              [1, 1],
              [0, 1],
            ],
          ],
        },
        properties: {},
      };
      const unclosed = await put(collection(point([0, 0]), point([1, 1]), point([2, 2]), open));
      expect(unclosed.status).toBe(422);
      expect(unclosed.json.error).toEqual({
        code: "validation_failed",
        message:
          "$.config.layers.zones.featureCollection.features[3].geometry.coordinates[0]: ring is not closed (its last position must equal its first)",
        details: { path: "$.config.layers.zones.featureCollection.features[3].geometry.coordinates[0]" },
        ...(via === "http" && { requestId: expect.any(String) }),
      });
      const bare = await put(collection({ type: "Feature", geometry: { type: "Point" }, properties: {} }));
      expect(bare.json.error.details).toEqual({
        path: "$.config.layers.zones.featureCollection.features[0].geometry.coordinates",
      });
      expect((await send("GET", "/connections/conn_layer")).status).toBe(404);
      expect((await put(collection(point([4.83, 45.76])))).status).toBe(201);
    });
  });
}

describe("a fixture's memory layers", () => {
  it("are checked when the fixture loads, naming the first problem", () => {
    const fixture = testFixture() as any;
    fixture.connections.push({
      id: "conn_bad_layer",
      teamId: "team_ops",
      name: "Bad layer",
      type: "memory",
      createdAt: "2026-09-01T00:00:00Z",
      config: {
        layers: {
          zones: {
            featureCollection: collection(point([1, 2]), {
              type: "Feature",
              geometry: { type: "Point" },
              properties: null,
            }),
          },
        },
      },
    });
    let error: unknown;
    try {
      parseFixture(fixture);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(FixtureError);
    expect((error as FixtureError).path).toBe(
      "$.connections[" +
        (fixture.connections.length - 1) +
        "].config.layers.zones.featureCollection.features[1].geometry.coordinates",
    );
  });
});
