//! The Linux quick start (docs/start/linux.md) runs as written, but for where it acts: a scratch
//! home, an archive made here in the release's shape (`scripts/release.sh`: the folder with the
//! sidecar and `configs/`) from the built sidecar, with its `SHA256SUMS`, and the test
//! transport's URL and token. `systemctl --user` is a stand-in that runs the user unit's
//! `ExecStart` (without systemd as PID 1), so the sidecar that would start at login relays a
//! login and a query.

use std::path::{Path, PathBuf};
use std::process::Command;

use e2e::processes::{Proc, bin_dir, free_port, wait_port};
use e2e::{DATABASE, TOKEN, mysql_port, opts, within};
use mysql_async::prelude::Queryable;

/// The ```sh blocks of `doc`, in order.
fn sh_blocks(doc: &str) -> Vec<String> {
    doc.split("```sh\n")
        .skip(1)
        .map(|b| b[..b.find("```").expect("a block's end")].into())
        .collect()
}

/// Runs `script` with bash in `cwd`, `home` as `$HOME` and its `.local/bin` first on `PATH`;
/// returns what it printed, after asserting it succeeded.
fn run(script: &str, cwd: &Path, home: &Path, shims: &Path) -> String {
    let path = format!(
        "{}:{}:{}",
        shims.display(),
        home.join(".local/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("HOME", home)
        .env("PATH", path)
        .env_remove("SQLTUNNEL_CONFIG")
        .env_remove("SQLTUNNEL_TOKEN")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("bash");
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script}\n{said}");
    said
}

/// Kills the sidecar the stand-in `systemctl` started, however the test ends.
struct Started(PathBuf);

impl Drop for Started {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            drop(Command::new("kill").arg(pid.trim()).status());
        }
    }
}

#[tokio::test]
async fn the_linux_quick_start_runs_as_written_and_its_sidecar_relays() {
    within(120, async {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let doc = std::fs::read_to_string(root.join("docs/start/linux.md")).expect("the doc");
        let blocks = sh_blocks(&doc);
        assert_eq!(blocks.len(), 4, "install, configure, run, at login: {blocks:?}");
        let dir = std::env::temp_dir().join(format!("sqltunnel-quickstart-{}", std::process::id()));
        let (home, downloads, shims) = (dir.join("home"), dir.join("downloads"), dir.join("shims"));
        for d in [&home, &downloads, &shims] {
            std::fs::create_dir_all(d).expect("dir");
        }
        let pid_file = dir.join("sidecar.pid");
        let started = Started(pid_file.clone());

        // The archive and its sums, as scripts/release.sh makes them.
        let name = format!("sqltunnel-{}-x86_64-unknown-linux-musl", env!("CARGO_PKG_VERSION"));
        let pack = format!(
            "mkdir -p {name} && cp {sidecar} {name}/ && cp -r {configs} {name}/configs && \
             tar -czf {name}.tar.gz {name} && rm -r {name} && sha256sum {name}.tar.gz > SHA256SUMS",
            sidecar = bin_dir().join("sidecar").display(),
            configs = root.join("configs").display(),
        );
        run(&pack, &downloads, &home, &shims);
        std::fs::write(
            shims.join("systemctl"),
            format!(
                r#"#!/bin/bash
set -euo pipefail
unit="$HOME/.config/systemd/user/sqltunnel-sidecar.service"
case "$*" in
    "--user daemon-reload") test -f "$unit" ;;
    "--user enable --now sqltunnel-sidecar")
        exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
        ${{exec_start//%h/$HOME}} >"$HOME/sidecar.log" 2>&1 </dev/null &
        echo $! >{pid} ;;
    *) echo "systemctl $*: not in the quick start" >&2; exit 1 ;;
esac
"#,
                pid = pid_file.display()
            ),
        )
        .expect("shim");
        run("chmod +x systemctl", &shims, &home, &shims);

        let transport_port = free_port();
        let transport_yaml = e2e::transport_yaml(mysql_port())
            .replace("127.0.0.1:0", &format!("127.0.0.1:{transport_port}"));
        let _transport = Proc::start("transport", &transport_yaml, "quickstart");
        wait_port(transport_port).await;
        let as_here = |block: &str| {
            block
                .replace("VERSION", env!("CARGO_PKG_VERSION"))
                .replace(
                    "https://gw.example.com/db-tunnel/",
                    &format!("http://127.0.0.1:{transport_port}/"),
                )
                .replace("'the token from your operator'", &format!("'{TOKEN}'"))
        };
        // 1 and 2: check, unpack, install; configure. Port 3306 may be taken here: the doc's
        // own remedy, a `listen` line.
        let said = run(&as_here(&blocks[0]), &downloads, &home, &shims);
        assert!(said.contains(".tar.gz: OK"), "{said}");
        run(&as_here(&blocks[1]), &downloads, &home, &shims);
        let sidecar_port = free_port();
        let config = home.join(".config/sqltunnel/sidecar.yaml");
        let mut yaml = std::fs::read_to_string(&config).expect("the config");
        yaml.push_str(&format!("listen: 127.0.0.1:{sidecar_port}\n"));
        std::fs::write(&config, yaml).expect("listen");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(home.join(".config/sqltunnel/token")).expect("token").permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "the token file is its owner's only");

        // 3: the check (the run in the foreground is what step 5 starts at login instead).
        let check = as_here(&blocks[2]);
        assert_eq!(check.lines().collect::<Vec<_>>(), ["sidecar check", "sidecar"]);
        let said = run("sidecar check", &downloads, &home, &shims);
        assert!(said.contains("token") && said.contains("accepted"), "{said}");

        // 5: at login.
        run(&as_here(&blocks[3]), &downloads, &home, &shims);
        wait_port(sidecar_port).await;
        let mut conn =
            mysql_async::Conn::new(opts(sidecar_port, Some(DATABASE))).await.expect("login");
        let one: Option<u8> = conn.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
        drop(conn.disconnect().await);
        // The sidecar stopped first: its pid is in the directory.
        drop(started);
        drop(std::fs::remove_dir_all(&dir));
    })
    .await;
}
