import { describe, expect, it } from "vitest";
import { storageUnavailable } from "../../src/base/api-error.js";
import { type GroupDialect, type GroupOutcome, groupCommit } from "../../src/sql/group-commit.js";

/** Every settlement of `promises`, as "ok:value" or "error:message", in input order. */
async function outcomes(promises: Promise<unknown>[]): Promise<string[]> {
  const settled = await Promise.allSettled(promises);
  return settled.map((s) =>
    s.status === "fulfilled" ? `ok:${String(s.value)}` : `error:${(s.reason as Error).message}`,
  );
}

/** A store that commits synchronously (SQLite's shape): the groups it committed, and the committed values. */
function syncStore(options: { limit?: number; refuse?: (n: number) => boolean; fault?: boolean } = {}) {
  const groups: number[][] = [];
  const committed: number[] = [];
  const dialect: GroupDialect<number, string> = {
    limit: options.limit ?? 100,
    reported: (error) =>
      (error as Error).message === "disk I/O error" ? storageUnavailable(undefined, { cause: error }) : error,
    commit(inputs) {
      groups.push([...inputs]);
      if (options.fault) throw new Error("disk I/O error");
      // A constraint of one input fails the whole transaction: nothing of the group is committed.
      const bad = inputs.find((n) => options.refuse?.(n));
      if (bad !== undefined) throw new Error(`constraint failed by ${bad}`);
      committed.push(...inputs);
      return inputs.map((n) => `#${n}`);
    },
  };
  return { groups, committed, commit: groupCommit(dialect) };
}

describe("group commit (sql/group-commit.ts)", () => {
  it("commits what arrives in one turn as one group, and settles each input only after that commit", async () => {
    const store = syncStore();
    const seen: string[] = [];
    const promises = [1, 2, 3].map((n) => store.commit.add(n).then((v) => (seen.push(v), v)));
    expect(store.groups).toEqual([]); // nothing before the turn ends
    await Promise.resolve();
    expect(seen).toEqual([]);
    expect(await Promise.all(promises)).toEqual(["#1", "#2", "#3"]);
    expect(store.groups).toEqual([[1, 2, 3]]);
    // The next turn is the next group.
    expect(await Promise.all([store.commit.add(4), store.commit.add(5)])).toEqual(["#4", "#5"]);
    expect(store.groups).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
  });

  it("bounds a group: past `limit` inputs the group is committed and the next one starts", async () => {
    const store = syncStore({ limit: 10 });
    const promises = Array.from({ length: 25 }, (_, n) => store.commit.add(n));
    // The 11th and the 21st add committed the ten before them at once.
    expect(store.groups.map((g) => g.length)).toEqual([10, 10]);
    await Promise.all(promises);
    expect(store.groups.map((g) => g.length)).toEqual([10, 10, 5]);
    expect(store.committed).toEqual(Array.from({ length: 25 }, (_, n) => n));
  });

  it("commits each input alone when the group fails for one input's reason: only that one fails", async () => {
    const store = syncStore({ refuse: (n) => n === 2 });
    const result = await outcomes([1, 2, 3].map((n) => store.commit.add(n)));
    expect(result).toEqual(["ok:#1", "error:constraint failed by 2", "ok:#3"]);
    expect(store.groups).toEqual([[1, 2, 3], [1], [2], [3]]);
    expect(store.committed).toEqual([1, 3]);
  });

  it("fails every input of the group with the store's 503 when the store itself failed, without trying each alone", async () => {
    const store = syncStore({ fault: true });
    const settled = await Promise.allSettled([1, 2, 3].map((n) => store.commit.add(n)));
    expect(store.groups).toEqual([[1, 2, 3]]);
    for (const s of settled) {
      expect(s).toMatchObject({
        status: "rejected",
        reason: { status: 503, code: "storage_unavailable", headers: { "retry-after": "1" } },
      });
    }
  });

  it("refuses an input its commit answers with an Error, and keeps the others of the group", async () => {
    const dialect: GroupDialect<number, string> = {
      limit: 100,
      reported: (error) => error,
      commit: (inputs) => inputs.map((n): GroupOutcome<string> => (n < 0 ? new Error(`unknown ${n}`) : `#${n}`)),
    };
    const commit = groupCommit(dialect);
    expect(await outcomes([1, -1, 2].map((n) => commit.add(n)))).toEqual(["ok:#1", "error:unknown -1", "ok:#2"]);
  });

  it("commits what is queued at once on flush() (a read that must see it), synchronously", () => {
    const store = syncStore();
    void store.commit.add(1);
    void store.commit.add(2);
    store.commit.flush();
    expect(store.committed).toEqual([1, 2]);
    store.commit.flush(); // nothing queued: nothing to commit
    expect(store.groups).toEqual([[1, 2]]);
  });

  it("runs one asynchronous group at a time: what arrives meanwhile forms the next group", async () => {
    const groups: number[][] = [];
    let release: () => void = () => {};
    const dialect: GroupDialect<number, number> = {
      limit: 3,
      reported: (error) => error,
      commit: async (inputs) => {
        groups.push([...inputs]);
        await new Promise<void>((resolve) => (release = resolve));
        return inputs;
      },
    };
    const commit = groupCommit(dialect);
    const first = [1, 2].map((n) => commit.add(n));
    await new Promise((resolve) => setImmediate(resolve));
    expect(groups).toEqual([[1, 2]]);
    // Arriving while the first group commits, over three turns: they wait, and go together (at most `limit` at once).
    const later = [3, 4, 5, 6].map((n) => commit.add(n));
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(groups).toEqual([[1, 2]]);
    release();
    expect(await Promise.all(first)).toEqual([1, 2]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(groups).toEqual([
      [1, 2],
      [3, 4, 5],
    ]);
    release();
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(groups).toEqual([[1, 2], [3, 4, 5], [6]]);
    const settled = commit.settled();
    release();
    await settled;
    expect(await Promise.all(later)).toEqual([3, 4, 5, 6]);
  });

  it("takes what its shortcut settles from the group, leaves the rest to the transaction, and gives the transaction all when the shortcut fails", async () => {
    const transactions: number[][] = [];
    let shortcutFails = false;
    const dialect: GroupDialect<number, string> = {
      limit: 100,
      reported: (error) => error,
      shortcut: async (inputs) => {
        if (shortcutFails) throw new Error("a key stored meanwhile");
        return inputs.map((n) => (n % 2 === 0 ? `fast #${n}` : undefined));
      },
      commit: async (inputs) => {
        transactions.push([...inputs]);
        return inputs.map((n) => `tx #${n}`);
      },
    };
    const commit = groupCommit(dialect);
    expect(await Promise.all([1, 2, 3, 4].map((n) => commit.add(n)))).toEqual(["tx #1", "fast #2", "tx #3", "fast #4"]);
    expect(transactions).toEqual([[1, 3]]);
    expect(await Promise.all([2, 4].map((n) => commit.add(n)))).toEqual(["fast #2", "fast #4"]);
    expect(transactions).toEqual([[1, 3]]); // all settled by the shortcut: no transaction
    shortcutFails = true;
    expect(await Promise.all([6, 7].map((n) => commit.add(n)))).toEqual(["tx #6", "tx #7"]);
    expect(transactions).toEqual([
      [1, 3],
      [6, 7],
    ]);
  });

  it("commits each alone after an asynchronous group fails for one input's reason", async () => {
    const transactions: number[][] = [];
    const dialect: GroupDialect<number, number> = {
      limit: 100,
      reported: (error) => error,
      commit: async (inputs) => {
        transactions.push([...inputs]);
        if (inputs.includes(13)) throw new Error("unlucky");
        return inputs;
      },
    };
    const commit = groupCommit(dialect);
    expect(await outcomes([12, 13, 14].map((n) => commit.add(n)))).toEqual(["ok:12", "error:unlucky", "ok:14"]);
    expect(transactions).toEqual([[12, 13, 14], [12], [13], [14]]);
  });
});
