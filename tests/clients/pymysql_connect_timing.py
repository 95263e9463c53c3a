"""Times PyMySQL's connect() (its login and the setup commands it sends) COUNT times to PORT,
closing each connection before the next, and prints the seconds of each, a line each. TLS
off: the same exchange directly and through a sidecar that offers none (PyMySQL takes TLS
when offered, and making its context costs tens of milliseconds of CPU)."""

import sys
import time

import pymysql

port, count = int(sys.argv[1]), int(sys.argv[2])
for _ in range(count):
    start = time.perf_counter()
    conn = pymysql.connect(host="127.0.0.1", port=port, user="app", password="app-pw",
                           database="tunnel_test", connect_timeout=10, ssl_disabled=True)
    print(time.perf_counter() - start, flush=True)
    conn.close()
