"""Runs the compressed-protocol queries with mysql-connector-python (compress=True); prints one
line per answer: row count and a checksum of the rows, or the error.

Usage: compressed_queries.py PORT USER PASSWORD DATABASE
"""

import sys
import zlib

import mysql.connector

port, user, password, database = sys.argv[1:5]
# Its compressed reader fails on large answers directly too (26.10.0: `struct.error` on a
# 20,000-row result from MariaDB itself), so the answers stay below that.
QUERIES = [
    "SELECT seq, REPEAT('x', 100) FROM seq_1_to_2000",
    "SELECT REPEAT('y', 70000)",
    "SELECT 1, 'short'",
    "SELECT no_such_column",
]
conn = mysql.connector.connect(host="127.0.0.1", port=int(port), user=user, password=password,
                               database=database, compress=True)
cur = conn.cursor()
for sql in QUERIES:
    try:
        cur.execute(sql)
        rows = cur.fetchall()
        print(f"{len(rows)} rows | {zlib.crc32(repr(rows).encode()):08x}")
    except mysql.connector.Error as e:
        print(f"error | {e.errno} | {e.msg}")
conn.close()
