#!/usr/bin/env bash
# Shared helpers for the project's scripts: installing packages, free ports, and throwaway
# MariaDB / nginx servers under a temp dir. Source it; do not run it.

# Installs the Debian packages given that are not installed yet.
ensure_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        echo "installing: ${missing[*]}" >&2
        local sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    fi
}

# The Debian packages the tests need (scripts/setup.sh, scripts/test.sh): a C compiler and make
# for the crates that build C, MariaDB (the tests start their own), nginx, Python, curl,
# MariaDB's Connector/J and a JDK, systemd's tools (systemd-analyze), a forward proxy; node and
# npm come with the test clients.
ensure_test_packages() {
    ensure_packages gcc libc6-dev make mariadb-server mariadb-client nginx openssl python3 \
        libmariadb-java systemd tinyproxy curl
    command -v javac >/dev/null || ensure_packages default-jdk-headless
}

# Prints a TCP port nobody listens on.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# The token both halves of the scripts' tunnels share (transport_config, sidecar_config): the
# example configs ship none, so each run makes one (256 bits, as `transport gen-token` does).
SQLTUNNEL_SCRIPT_TOKEN=${SQLTUNNEL_SCRIPT_TOKEN:-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}

# transport_config CONFIGS UPSTREAM PORT OUT: CONFIGS/transport.example.yaml, as it is but for
# its upstream's address (host:port), the port it listens on and its one token,
# $SQLTUNNEL_SCRIPT_TOKEN, written to OUT. An older example's placeholder token (BASELINE_CONFIGS
# of scripts/bench.sh) is taken out.
transport_config() {
    {
        sed -e "s/address: 127.0.0.1:3306/address: $2/" -e "s/^listen: 127.0.0.1:8080/listen: 127.0.0.1:$3/" \
            -e '/^tokens:$/d' -e '/^  - change-me-please$/d' "$1/transport.example.yaml"
        echo "tokens: [$SQLTUNNEL_SCRIPT_TOKEN]"
    } >"$4"
}

# sidecar_config CONFIGS TRANSPORT_PORT PORT OUT [STREAM]: CONFIGS/sidecar.example.yaml, as it
# is but for the transport's port, the port it listens on, `transport.stream` (default auto)
# and its token, $SQLTUNNEL_SCRIPT_TOKEN in place of the example's `token_env` (or an older
# example's `token`), written to OUT.
sidecar_config() {
    sed -e "s#url: http://127.0.0.1:8080/#url: http://127.0.0.1:$2/#" -e "s/^listen: 127.0.0.1:3306/listen: 127.0.0.1:$3/" \
        -e "s/^  stream: auto/  stream: ${5:-auto}/" \
        -e "s/^  token\(_env\|_file\)\?: .*/  token: $SQLTUNNEL_SCRIPT_TOKEN/" "$1/sidecar.example.yaml" >"$4"
}

# Waits until host:port accepts connections (at most $3 seconds, default 30).
wait_port() {
    local port=$1 deadline=$((SECONDS + ${2:-30}))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        ((SECONDS < deadline)) || { echo "nothing listens on port $port" >&2; return 1; }
        sleep 0.2
    done
}

# make_test_certs DIR: a throwaway CA (DIR/ca.pem) and a server certificate for 127.0.0.1
# (DIR/server.pem, DIR/server.key) signed by it.
make_test_certs() {
    local dir=$1
    mkdir -p "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3 -subj "/CN=sqltunnel test CA" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/san.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -CAcreateserial -days 3 -extfile "$dir/san.ext" -out "$dir/server.pem" 2>/dev/null
}

# start_mariadb DIR PORT: a throwaway MariaDB bound to 127.0.0.1:PORT with its data in DIR,
# TLS with a throwaway CA (DIR/tls/ca.pem), a database `tunnel_test`, a user app/app-pw with
# every privilege and a user app_tls/app-tls-pw that must use TLS.
start_mariadb() {
    local dir=$1 port=$2
    mkdir -p "$dir"
    make_test_certs "$dir/tls"
    local user_opt=()
    [[ $(id -u) -eq 0 ]] && user_opt=(--user=root)
    mariadb-install-db --no-defaults "${user_opt[@]}" --datadir="$dir/data" --skip-test-db \
        --auth-root-authentication-method=socket --auth-root-socket-user="$(id -un)" >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; return 1; }
    # Debian installs the server in /usr/sbin, outside a normal user's PATH.
    local server
    server=$(PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v mariadbd) \
        || { echo "mariadbd not found: install mariadb-server (scripts/setup.sh)" >&2; return 1; }
    "$server" --no-defaults "${user_opt[@]}" --datadir="$dir/data" --socket="$dir/mysqld.sock" \
        --port="$port" --bind-address=127.0.0.1 --pid-file="$dir/mysqld.pid" \
        --log-error="$dir/error.log" --max-allowed-packet=1G --max-connections=2000 --back-log=2000 \
        --innodb-buffer-pool-size=256M --innodb-log-file-size=256M \
        --innodb-flush-log-at-trx-commit=2 --skip-name-resolve \
        --ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server.pem" --ssl-key="$dir/tls/server.key" &
    echo $! >"$dir/mysqld.launcher.pid"
    local deadline=$((SECONDS + 60))
    until mariadb --no-defaults --socket="$dir/mysqld.sock" -u"$(id -un)" -e 'SELECT 1' >/dev/null 2>&1; do
        ((SECONDS < deadline)) || { echo "MariaDB did not start:" >&2; tail -20 "$dir/error.log" >&2; return 1; }
        sleep 0.3
    done
    mariadb --no-defaults --socket="$dir/mysqld.sock" -u"$(id -un)" <<'SQL'
CREATE DATABASE IF NOT EXISTS tunnel_test;
CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 'app-pw';
CREATE USER IF NOT EXISTS 'app'@'localhost' IDENTIFIED BY 'app-pw';
GRANT ALL PRIVILEGES ON *.* TO 'app'@'%' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'app'@'localhost' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'app_tls'@'%' IDENTIFIED BY 'app-tls-pw' REQUIRE SSL;
GRANT ALL PRIVILEGES ON tunnel_test.* TO 'app_tls'@'%';
FLUSH PRIVILEGES;
SQL
}

# stop_mariadb DIR
stop_mariadb() {
    local dir=$1
    [[ -f "$dir/mysqld.pid" ]] && kill "$(cat "$dir/mysqld.pid")" 2>/dev/null
    [[ -f "$dir/mysqld.launcher.pid" ]] && wait "$(cat "$dir/mysqld.launcher.pid")" 2>/dev/null
    return 0
}

# install_test_clients DIR
# Real clients the tests drive, kept under DIR between runs: PyMySQL with cryptography,
# mysql-connector-python and prometheus-client (its parser reads our metrics; PyPI) in a
# virtualenv, node's mysql2 (npm), and Oracle's
# Connector/J jar.
install_test_clients() {
    local dir=$1
    mkdir -p "$dir"
    if ! "$dir/venv/bin/python" -c 'import pymysql, cryptography, mysql.connector, prometheus_client' 2>/dev/null; then
        python3 -m venv "$dir/venv" 2>/dev/null || { ensure_packages python3-venv && python3 -m venv "$dir/venv"; }
        "$dir/venv/bin/pip" install --quiet --disable-pip-version-check 'PyMySQL>=1.1,<2' \
            'cryptography>=42' 'mysql-connector-python==26.10.0' 'prometheus-client>=0.20'
    fi
    # Oracle's MySQL Connector/J 8.0.33 (DBeaver's MySQL driver) comes bundled in PyPI's wbjdbc
    # wheel; only the jar is kept.
    if [[ ! -f "$dir/jars/mysql-connector-j-8.0.33.jar" ]]; then
        mkdir -p "$dir/jars"
        "$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
            --dest "$dir/jars" 'wbjdbc==2.4.0'
        "$dir/venv/bin/python" - "$dir/jars" <<'PY'
import glob, sys, zipfile
jars = sys.argv[1]
with zipfile.ZipFile(glob.glob(f"{jars}/wbjdbc-*.whl")[0]) as wheel:
    data = wheel.read("wbjdbc/resources/maven/mysql/mysql-connector-j-8.0.33.jar")
with open(f"{jars}/mysql-connector-j-8.0.33.jar", "wb") as out:
    out.write(data)
PY
        rm -f "$dir"/jars/wbjdbc-*.whl
    fi
    # mysql2, and oidc-provider: the OpenID Provider the identity tests take tokens from.
    if [[ ! -f "$dir/node/node_modules/mysql2/package.json" || ! -f "$dir/node/node_modules/oidc-provider/package.json" ]]; then
        command -v npm >/dev/null || ensure_packages nodejs npm
        mkdir -p "$dir/node"
        [[ -f "$dir/node/package.json" ]] || echo '{}' > "$dir/node/package.json"
        (cd "$dir/node" && npm install --silent --no-audit --no-fund --no-save 'mysql2@3' 'oidc-provider@9' >/dev/null)
    fi
}

# The 64-bit Wine loader (Debian's wine64 package).
wine_loader_path() {
    local w
    for w in /usr/lib/wine/wine64 /usr/bin/wine64 /usr/lib/wine/wine /usr/bin/wine; do
        [[ -x $w ]] && { echo "$w"; return; }
    done
    echo "no Wine loader found (apt-get install wine64)" >&2
    return 1
}

# Puts the Windows program $1 in directory $2 beside the bcryptprimitives.dll stand-in that
# Wine 8.0 lacks (tests/wine/bcryptprimitives.c: Rust's std takes its random bytes from it).
wine_stage() {
    mkdir -p "$2"
    cp "$1" "$2/"
    x86_64-w64-mingw32-gcc -shared -O2 -o "$2/bcryptprimitives.dll" tests/wine/bcryptprimitives.c -ladvapi32
}

# Runs the Windows program $1 under Wine with the remaining arguments.
wine_loader() {
    local dir
    dir=$(mktemp -d)
    wine_stage "$1" "$dir"
    local exe="$dir/$(basename "$1")"
    shift
    WINEDEBUG=-all "$(wine_loader_path)" "$exe" "$@"
    local status=$?
    rm -rf "$dir"
    return $status
}
