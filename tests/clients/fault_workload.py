"""One client of the seeded random fault run, with PyMySQL (tests/harness/fault_python.rs runs
it): its own seeded operations, each printed as one JSON line of what it was told (the ids and
counter increments it wrote, whether acknowledged, the blobs it wrote with their length and
SHA-1, an answer that differs from what the server gives), for the harness to check against the
database afterwards.

Arguments: port user password database table client seed operations infile blobs(0|1)."""

import hashlib
import json
import random
import sys

import pymysql
from pymysql.constants import CLIENT

# Rows of the large select: seq and 50 'x'.
LARGE_ROWS = 20_000
# Longest an operation may take (each read and write), as for the other clients: a bound for
# hangs, not a speed check. A blob's statement resumes over many new connections under the
# run's cuts, so a run with blobs waits as long for a blob as the other clients do (90 s).
LIMIT = 30
BLOB_LIMIT = 90


class Client:
    def __init__(self, argv):
        (self.port, self.user, self.password, self.database, self.table, client, seed,
         operations, self.infile, blobs) = argv
        self.client, self.operations = int(client), int(operations)
        self.blobs_on = blobs == "1"
        self.limit = BLOB_LIMIT if self.blobs_on else LIMIT
        self.rng = random.Random(int(seed))
        self.next_id = self.client * 1_000_000_000
        self.written_blobs = []
        self.conn = None

    def fresh_id(self):
        self.next_id += 1
        return self.next_id

    def connect(self):
        conn = pymysql.connect(
            host="127.0.0.1", port=int(self.port), user=self.user, password=self.password,
            database=self.database, autocommit=True, local_infile=True, ssl_disabled=True,
            client_flag=CLIENT.MULTI_STATEMENTS, connect_timeout=LIMIT, read_timeout=self.limit,
            write_timeout=self.limit)
        conn.cursor().execute(f"SET @client = {self.client}")
        return conn

    def run(self):
        for op in range(self.operations):
            told = {"op": op, "kind": "connect", "ok": False, "error": None, "ids": [],
                    "counts": 0, "blobs": [], "garbled": None}
            try:
                if self.conn is None:
                    self.conn = self.connect()
                told["kind"] = self.draw()
                getattr(self, told["kind"])(self.conn.cursor(), told)
                told["ok"] = True
            except (pymysql.err.Error, OSError) as e:
                told["error"] = f"{type(e).__name__}: {e}"
                self.hang_up()
            print(json.dumps(told), flush=True)
        self.hang_up()

    def hang_up(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except (pymysql.err.Error, OSError):
                pass
            self.conn = None

    def draw(self):
        n = self.rng.randrange(100)
        for bound, kind in ((22, "insert"), (36, "count"), (45, "transaction"), (53, "large"),
                            (63, "medium"), (69, "batch"), (74, "call"), (78, "many"),
                            (81, "load"), (83, "session"), (87, "blob_insert"),
                            (90, "blob_read"), (96, "medium")):
            if n < bound:
                if kind == "blob_insert" and not self.blobs_on:
                    return "insert"
                if kind == "blob_read" and not self.written_blobs:
                    return "medium"
                return kind
        return "reconnect"

    def garbled(self, told, what):
        told["garbled"] = what

    def insert(self, cur, told):
        told["ids"].append(self.fresh_id())
        cur.execute(f"INSERT INTO {self.table}_ids VALUES (%s, %s)", (told["ids"][0], self.client))

    def count(self, cur, told):
        told["counts"] = 1
        cur.execute(f"INSERT INTO {self.table}_counters VALUES (%s, 1) "
                    "ON DUPLICATE KEY UPDATE n = n + 1", (self.client,))

    def transaction(self, cur, told):
        id_ = self.fresh_id()
        told["ids"].append(id_)
        told["counts"] = 1
        self.conn.begin()
        cur.execute(f"INSERT INTO {self.table}_ids VALUES (%s, %s)", (id_, self.client))
        cur.execute(f"INSERT INTO {self.table}_counters VALUES (%s, 1) "
                    "ON DUPLICATE KEY UPDATE n = n + 1", (self.client,))
        cur.execute(f"SELECT COUNT(*) FROM {self.table}_ids WHERE id = %s", (id_,))
        if rows(cur) != ((1,),):
            self.garbled(told, f"transaction does not see its own insert of {id_}")
        self.conn.commit()

    def large(self, cur, told):
        cur.execute(f"SELECT seq, REPEAT('x', 50) FROM seq_1_to_{LARGE_ROWS}")
        got = rows(cur)
        if got != tuple((i, "x" * 50) for i in range(1, LARGE_ROWS + 1)):
            self.garbled(told, f"large select: {len(got)} rows")

    def medium(self, cur, told):
        n, width = self.rng.randrange(1, 4000), self.rng.randrange(300)
        cur.execute(f"SELECT seq, REPEAT(CHAR(65 + seq % 26 USING ascii), {width}) "
                    f"FROM seq_1_to_{n}")
        got = rows(cur)
        if got != tuple((i, chr(65 + i % 26) * width) for i in range(1, n + 1)):
            self.garbled(told, f"medium select of {n} rows x {width}: {len(got)} rows")

    def batch(self, cur, told):
        # Several statements in one query: inserts, a counter, and a read of what they wrote.
        ids = [self.fresh_id() for _ in range(self.rng.randrange(2, 6))]
        told["ids"], told["counts"] = ids, 1
        sql = "".join(f"INSERT INTO {self.table}_ids VALUES ({i}, {self.client});" for i in ids)
        sql += (f"INSERT INTO {self.table}_counters VALUES ({self.client}, 1) "
                "ON DUPLICATE KEY UPDATE n = n + 1;"
                f"SELECT COUNT(*) FROM {self.table}_ids WHERE id BETWEEN {ids[0]} AND {ids[-1]}")
        sets = all_sets(cur, sql)
        want = [()] * (len(ids) + 1) + [((len(ids),),)]
        if sets != want:
            self.garbled(told, f"batch of {len(ids)} inserts: {sets!r:.200}")

    def call(self, cur, told):
        n = self.rng.randrange(1, 1000)
        sets = all_sets(cur, f"CALL {self.table}_results({n})")
        want = [tuple((i,) for i in range(1, n + 1)), ((n, "y" * n),), ((n,),)]
        if sets[:3] != want or any(s for s in sets[3:]):
            self.garbled(told, f"CALL of {n}: {len(sets)} result sets")

    def many(self, cur, told):
        # executemany: one multi-row INSERT.
        ids = [self.fresh_id() for _ in range(self.rng.randrange(2, 50))]
        told["ids"] = ids
        cur.executemany(f"INSERT INTO {self.table}_ids VALUES (%s, %s)",
                        [(i, self.client) for i in ids])
        if cur.rowcount != len(ids):
            self.garbled(told, f"executemany of {len(ids)} rows affected {cur.rowcount}")

    def load(self, cur, told):
        ids = [self.fresh_id() for _ in range(self.rng.randrange(1, 1500))]
        with open(self.infile, "w", encoding="ascii") as f:
            f.write("".join(f"{i},{self.client}\n" for i in ids))
        told["ids"] = ids
        cur.execute(f"LOAD DATA LOCAL INFILE '{self.infile}' INTO TABLE {self.table}_ids "
                    "FIELDS TERMINATED BY ','")
        if cur.rowcount != len(ids):
            self.garbled(told, f"a load of {len(ids)} rows affected {cur.rowcount}")

    def session(self, cur, told):
        cur.execute("SELECT @client, CONNECTION_ID()")
        who, id_ = cur.fetchone()
        if who != self.client or not id_:
            self.garbled(told, f"session state: @client = {who!r}")

    def blob_insert(self, cur, told):
        body = self.rng.randbytes(self.rng.randrange(1_000_000, 4_000_001))
        blob = [self.fresh_id(), len(body), hashlib.sha1(body).hexdigest()]
        told["blobs"].append(blob)
        cur.execute(f"INSERT INTO {self.table}_blobs (id, client, body) VALUES (%s, %s, %s)",
                    (blob[0], self.client, body))
        self.written_blobs.append(blob)

    def blob_read(self, cur, told):
        id_, length, sha1 = self.rng.choice(self.written_blobs)
        cur.execute(f"SELECT body FROM {self.table}_blobs WHERE id = %s", (id_,))
        got = rows(cur)
        if [(len(b), hashlib.sha1(b).hexdigest()) for (b,) in got] != [(length, sha1)]:
            self.garbled(told, f"blob {id_} read back as {[len(b) for (b,) in got]} bytes")

    def reconnect(self, cur, told):
        self.hang_up()


def rows(cur):
    """The rows of the current result set, as a tuple of tuples (an OK answer has none)."""
    return tuple(cur.fetchall() or ())


def all_sets(cur, sql):
    """Every result set of `sql`, in order."""
    cur.execute(sql)
    sets = [rows(cur)]
    while cur.nextset():
        sets.append(rows(cur))
    return sets


if __name__ == "__main__":
    Client(sys.argv[1:]).run()
