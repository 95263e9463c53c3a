//! A real nginx (Debian's package) started on a free port with a config written to a temp dir;
//! never the system service.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::processes::{free_port, wait_port};

/// A running nginx, stopped on drop.
pub struct Nginx {
    child: Child,
    /// Port nginx listens on.
    pub port: u16,
    dir: PathBuf,
}

/// The example config shipped in `configs/`, pointed at `transports`, served over plain HTTP
/// on `port` (its TLS lines and its redirecting server left out): the tests of what nginx does
/// with the tunnel's requests, which TLS does not change.
pub fn example_config(transports: &[u16], port: u16) -> String {
    let text = example_pointed_at(transports);
    let redirect_start = text.find("# Plain HTTP only").expect("the redirecting server");
    let tls_start = text.find("server {\n    listen 443 ssl;").expect("the TLS server");
    let text = format!("{}{}", &text[..redirect_start], &text[tls_start..]);
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("ssl_certificate"))
        .map(|l| format!("{l}\n"))
        .collect();
    text.replace("listen 443 ssl;", &format!("listen 127.0.0.1:{port};"))
}

/// The example config as shipped, TLS included: HTTPS on `port` with `cert` and `key`, the
/// redirecting server on `plain`.
pub fn example_config_tls(
    transports: &[u16],
    (port, plain): (u16, u16),
    (cert, key): (&std::path::Path, &std::path::Path),
) -> String {
    example_pointed_at(transports)
        .replace("listen 443 ssl;", &format!("listen 127.0.0.1:{port} ssl;"))
        .replace("listen 80;", &format!("listen 127.0.0.1:{plain};"))
        .replace("/etc/ssl/certs/gateway.example.com.pem", &cert.to_string_lossy())
        .replace("/etc/ssl/private/gateway.example.com.key", &key.to_string_lossy())
}

/// The example config with its upstream block naming `transports` (hashed by affinity when
/// there are several).
fn example_pointed_at(transports: &[u16]) -> String {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs/nginx.example.conf"),
    )
    .expect("configs/nginx.example.conf");
    let servers: String =
        transports.iter().map(|p| format!("server 127.0.0.1:{p};\n    ")).collect();
    let text = text.replace("server 127.0.0.1:8080;\n    ", &servers);
    if transports.len() > 1 {
        text.replace(
            "# hash $http_x_tunnel_affinity consistent;",
            "hash $http_x_tunnel_affinity consistent;",
        )
    } else {
        text
    }
}

/// nginx's defaults: a bare `proxy_pass` (HTTP/1.0 upstream, buffering on, 60 s read timeout,
/// 1 MB body limit), plus `extra` directives inside the location.
pub fn default_config(transport: u16, port: u16, extra: &str) -> String {
    format!(
        "server {{\n    listen 127.0.0.1:{port};\n    location /db-tunnel/ {{\n        proxy_pass http://127.0.0.1:{transport}/;\n        {extra}\n    }}\n}}\n"
    )
}

impl Nginx {
    /// Starts nginx with `http_block` (the contents of `http { }`) on `port`.
    pub async fn start(http_block: &str, port: u16) -> Nginx {
        let dir =
            std::env::temp_dir().join(format!("sqltunnel-nginx-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("tmp")).expect("nginx dir");
        let conf = format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\nevents {{ worker_connections 4096; }}\nhttp {{\n    access_log {d}/access.log;\n    client_body_temp_path {d}/tmp/body;\n    proxy_temp_path {d}/tmp/proxy;\n    fastcgi_temp_path {d}/tmp/fastcgi;\n    uwsgi_temp_path {d}/tmp/uwsgi;\n    scgi_temp_path {d}/tmp/scgi;\n{http_block}\n}}\n",
            d = dir.display()
        );
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf).expect("write nginx.conf");
        let child = Command::new(nginx_binary())
            .arg("-c")
            .arg(&path)
            .arg("-p")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start nginx (scripts/test.sh installs it)");
        wait_port(port).await;
        Nginx { child, port, dir }
    }

    /// A free port for a new nginx.
    pub fn port() -> u16 {
        free_port()
    }

    /// The access log so far.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }
}

fn nginx_binary() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("nginx"))
}

impl Drop for Nginx {
    /// Stops nginx with SIGTERM, so the master takes its workers down (SIGKILL would leave
    /// them running); SIGKILL only if it has not stopped within 3 s.
    fn drop(&mut self) {
        let term = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        if term.is_ok_and(|s| s.success()) {
            for _ in 0..60 {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        drop(self.child.kill());
        drop(self.child.wait());
    }
}
