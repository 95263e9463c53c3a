"""Logs in with a Python driver's default settings; prints who the server says we are, or the error.

Usage: default_login.py pymysql|connector PORT USER PASSWORD DATABASE
"""

import sys

driver, port, user, password, database = sys.argv[1:6]
if driver == "pymysql":
    import pymysql as module
    errors = module.err.MySQLError
else:
    import mysql.connector as module
    errors = module.Error
try:
    conn = module.connect(host="127.0.0.1", port=int(port), user=user, password=password,
                          database=database)
    cur = conn.cursor()
    cur.execute("SELECT CURRENT_USER(), DATABASE()")
    current_user, current_db = cur.fetchone()
    print(f"user | {current_user} | {current_db}")
    conn.close()
except errors as e:
    code = getattr(e, "errno", None) or e.args[0]
    print(f"error | {code} | {e}")
