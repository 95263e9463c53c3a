"""Runs queries with mysql-connector-python's pure reader (compress=True, use_pure=True); prints
one line per answer: row count and a checksum of the rows, the server's error, or the client's
own failure (after which it connects again for the next query). A read waits at most 20 s: a
row cut short would otherwise leave it waiting for the rest forever.

Usage: compressed_queries.py PORT USER PASSWORD DATABASE [--text|--prepared] [--plain] SQL...
  --prepared  a prepared cursor (binary rows) instead of a text one (--text)
  --plain     without compression (a reference for what the rows are)
"""

import sys
import zlib

import mysql.connector

port, user, password, database = sys.argv[1:5]
flags = {a for a in sys.argv[5:] if a.startswith("--")}
queries = [a for a in sys.argv[5:] if not a.startswith("--")]


def connect():
    return mysql.connector.connect(host="127.0.0.1", port=int(port), user=user,
                                   password=password, database=database, use_pure=True,
                                   compress="--plain" not in flags, read_timeout=20)


conn = connect()
for sql in queries:
    try:
        cur = conn.cursor(prepared="--prepared" in flags)
        cur.execute(sql)
        rows = cur.fetchall()
        cur.close()
        print(f"{len(rows)} rows | {zlib.crc32(repr(rows).encode()):08x}", flush=True)
    except mysql.connector.Error as e:
        print(f"error | {e.errno} | {e.msg}", flush=True)
    except Exception as e:  # the reader's own failure: the connection is lost
        print(f"failed | {type(e).__name__}", flush=True)
        conn = connect()
conn.close()
