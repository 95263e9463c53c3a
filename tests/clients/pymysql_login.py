"""Logs in with PyMySQL and prints one JSON line: who the server says we are, or the error."""

import json
import ssl
import sys

import pymysql

port, user, password, database, mode = sys.argv[1:6]
options = dict(host="127.0.0.1", port=int(port), user=user, password=password,
               database=database or None, connect_timeout=10)
if mode == "tls":
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    options["ssl"] = context
else:
    options["ssl_disabled"] = True  # PyMySQL may otherwise prefer TLS when offered
try:
    conn = pymysql.connect(**options)
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER(), DATABASE()")
        current_user, current_db = cur.fetchone()
    print(json.dumps({"user": current_user, "database": current_db,
                      "tls": conn._sock.__class__.__name__ == "SSLSocket"}))
    conn.close()
except pymysql.err.MySQLError as e:
    print(json.dumps({"error": e.args[0], "message": e.args[1] if len(e.args) > 1 else ""}))
