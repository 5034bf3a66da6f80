import { isUploadOrConnection, type Row, type UploadOrConnectionDataset } from "../domain/model.js";
import { notFound } from "../base/api-error.js";
import { inferColumnsAlongside, parseRowStream } from "../http/bulk-rows.js";
import type { StreamBody } from "../http/types.js";
import { assertWritable } from "../storage/mount.js";
import { type AdminDeps, actorFor, type ChangeOptions, checkId, isoNow, recordChange } from "./change.js";
import { uploadMeter, type UploadProgressOptions } from "./upload-progress.js";

/** A dataset's rows, replaced or appended in bulk. */
export interface RowsAdmin {
  /**
   * Replace (`replace`) or append to (`append`) a dataset's rows from a body
   * as it arrives: a JSON array (`application/json`), NDJSON
   * (`application/x-ndjson`) or CSV (`text/csv`, header row). Atomic: a
   * reader sees the rows before or after, never a mix; a refused row (422
   * naming its line) stores nothing. Columns are inferred as for webhook
   * rows unless the dataset declares them. Answers the dataset as stored.
   */
  uploadDatasetRows(
    id: string,
    mode: RowsMode,
    body: StreamBody,
    options?: UploadOptions,
  ): Promise<UploadOrConnectionDataset>;
  /** The same from rows in hand (objects, nested ones flattened as in an upload). */
  writeDatasetRows(
    id: string,
    mode: RowsMode,
    rows: Iterable<Row> | AsyncIterable<Row>,
    options?: UploadOptions,
  ): Promise<UploadOrConnectionDataset>;
}

type RowsMode = "replace" | "append";

/** What an upload takes besides its rows: its actor, and who hears of its progress (`onProgress`). */
export type UploadOptions = ChangeOptions & UploadProgressOptions;

export function rowsAdmin(deps: AdminDeps): RowsAdmin {
  const { storage } = deps.ports;

  async function upload(
    id: string,
    mode: RowsMode,
    body: StreamBody,
    options?: UploadOptions,
  ): Promise<UploadOrConnectionDataset> {
    assertWritable(storage.rows, "writeDatasetRows");
    checkId(id);
    const dataset = await storage.catalog.getDataset(id);
    if (!dataset || !isUploadOrConnection(dataset)) throw notFound("dataset");
    const actor = await actorFor(storage, options);
    const declared = dataset.columnsDeclared === true ? dataset.columns : null;
    // Appended rows widen the columns the dataset has; a replace infers them afresh (declared ones keep their
    // types, and a declared column without a type takes the one its values show).
    const base = mode === "append" ? dataset.columns : (declared ?? []);
    const meter = uploadMeter(options, deps.ports.clock);
    const chunks = meter === null ? body.chunks : meter.chunks(body.chunks);
    const tracked = inferColumnsAlongside(parseRowStream(chunks, body.contentType, { columns: declared }), base);
    let rowCount: number;
    try {
      ({ rowCount } = await storage.rows.writeDatasetRows({
        datasetId: id,
        mode,
        rows: meter === null ? tracked.rows : meter.rowsOf(tracked.rows),
        columns: () => tracked.columns(),
        updatedAt: isoNow(deps),
      }));
    } finally {
      meter?.stop();
    }
    await recordChange(deps, {
      teamIds: [dataset.teamId],
      action: "dataset.updated",
      actor,
      target: { type: "dataset", id },
      details: { rows: mode === "replace" ? "replaced" : "appended", rowCount },
    });
    const stored = await storage.catalog.getDataset(id);
    if (!stored || !isUploadOrConnection(stored)) throw notFound("dataset");
    return stored;
  }

  return {
    uploadDatasetRows: upload,
    writeDatasetRows(id, mode, rows, options) {
      // Through the upload path as NDJSON: one validation path for rows from HTTP and from code.
      return upload(id, mode, { chunks: ndjson(rows), contentType: "application/x-ndjson" }, options);
    },
  };
}

async function* ndjson(rows: Iterable<Row> | AsyncIterable<Row>): AsyncIterable<Uint8Array> {
  const encoder = new TextEncoder();
  for await (const row of rows) yield encoder.encode(`${JSON.stringify(row)}\n`);
}
