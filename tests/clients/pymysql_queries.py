"""Runs queries with PyMySQL (multi-statements and local infile off unless asked) and prints one JSON line per
query: its result sets, or its error."""

import json
import sys

import pymysql
from pymysql.constants import CLIENT

port, user, password, database, multi = sys.argv[1:6]
flags = CLIENT.MULTI_STATEMENTS if multi == "multi" else 0
conn = pymysql.connect(host="127.0.0.1", port=int(port), user=user, password=password,
                       database=database, client_flag=flags, ssl_disabled=True,
                       local_infile=multi == "infile")
for sql in sys.argv[6:]:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        sets = [[list(map(str, row)) for row in cur.fetchall()]]
        while cur.nextset():
            sets.append([list(map(str, row)) for row in cur.fetchall()])
        print(json.dumps({"sql": sql, "sets": sets}))
    except pymysql.err.MySQLError as e:
        print(json.dumps({"sql": sql, "error": list(e.args)}))
conn.close()
