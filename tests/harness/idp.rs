//! A real OpenID Provider for the identity tests: `tests/idp/provider.mjs` runs npm's
//! `oidc-provider` (installed by `scripts/setup.sh` next to mysql2, `SQLTUNNEL_TEST_NODE_MODULES`),
//! which issues JWT access tokens with the client credentials grant.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::processes::free_port;

/// The resource whose tokens are ES256, audience `sqltunnel`.
pub const ES256: &str = "https://sqltunnel.test/es256";
/// RS256, audience `sqltunnel`.
pub const RS256: &str = "https://sqltunnel.test/rs256";
/// EdDSA, audience `sqltunnel`.
pub const EDDSA: &str = "https://sqltunnel.test/eddsa";
/// ES256, audience `sqltunnel`, valid for 2 s.
pub const SHORT: &str = "https://sqltunnel.test/short";
/// The people's client of [`Provider::for_people`] (public, loopback redirect, device grant).
pub const PEOPLE_CLIENT: &str = "sqltunnel-cli";
/// ES256, audience `other`.
pub const OTHER_AUDIENCE: &str = "https://other.test/";

/// A client of the provider: its id and secret, and the claims its tokens carry.
pub struct IdpClient {
    /// `client_id` (the tokens' `sub`).
    pub id: &'static str,
    /// Its secret.
    pub secret: &'static str,
    /// Extra claims, as JSON (e.g. `{"email": "…", "groups": ["…"]}`).
    pub claims: serde_json::Value,
}

/// A running provider, stopped on drop.
pub struct Provider {
    child: Child,
    /// Its issuer URL (`http://127.0.0.1:PORT`).
    pub issuer: String,
    /// Its private keys (delete it and start again to rotate them).
    pub keys_file: PathBuf,
    dir: PathBuf,
    port: u16,
    /// The rest of its config, kept for a restart.
    more: serde_json::Value,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("idp").join("provider.mjs")
}

fn modules() -> String {
    crate::mariadb::client_path("SQLTUNNEL_TEST_NODE_MODULES", "node/node_modules")
}

impl Provider {
    /// Starts a provider on a free port with a new key set, serving `clients`.
    pub fn start(tag: &str, clients: &[IdpClient]) -> Provider {
        Self::start_with(tag, clients, serde_json::json!({}))
    }

    /// [`Self::start`], with more of the provider's config (`public_clients`: people's clients
    /// for `sidecar login`, each `{client_id, refresh_ttl?}`; `person`: `{id, claims}`, who
    /// logs in at its pages).
    pub fn start_with(tag: &str, clients: &[IdpClient], more: serde_json::Value) -> Provider {
        let dir = std::env::temp_dir().join(format!("sqltunnel-idp-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("idp dir");
        let keys_file = dir.join("keys.json");
        drop(std::fs::remove_file(&keys_file));
        let mut provider = Self::start_at(dir, keys_file, free_port(), clients, &more);
        provider.more = more;
        provider
    }

    /// A provider for `sidecar login`: its person is Ada (`ada@example.test`, a DBA), its
    /// people's client [`PEOPLE_CLIENT`], whose logins last `refresh_ttl` seconds.
    pub fn for_people(tag: &str, refresh_ttl: u64) -> Provider {
        let more = serde_json::json!({
            "public_clients": [{ "client_id": PEOPLE_CLIENT, "refresh_ttl": refresh_ttl }],
            "person": { "id": "ada", "claims": { "email": "ada@example.test", "groups": ["dba"] } },
        });
        Self::start_with(tag, &[], more)
    }

    /// A transport config on `port` that takes this provider's tokens (identity: the email;
    /// the `dba` group reaches every upstream).
    pub fn transport_yaml(&self, port: u16, mysql_port: u16) -> String {
        format!(
            "listen: 127.0.0.1:{port}\nupstreams:\n  - name: main\n    address: 127.0.0.1:{mysql_port}\nsession_timeout: 30s\noidc:\n  issuer: {}\n  audience: sqltunnel\n  jwks_url: {}\n  leeway: 0s\n  identity_claim: email\n  groups_claim: groups\n  groups:\n    dba: [\"*\"]\n",
            self.issuer,
            self.jwks_url()
        )
    }

    /// A script that plays a person's browser (`tests/idp/person.mjs`): `$BROWSER` for
    /// `sidecar login`, written into this provider's directory.
    pub fn person_browser(&self) -> PathBuf {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("idp").join("person.mjs");
        let path = self.dir.join("browser.sh");
        let text = format!("#!/bin/sh\nexec node {} \"$1\"\n", script.display());
        std::fs::write(&path, text).expect("browser script");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&path, mode).expect("chmod");
        path
    }

    /// Another provider at a new port (so another issuer) signing with the same keys.
    pub fn twin(&self, tag: &str, clients: &[IdpClient]) -> Provider {
        let dir = self.dir.join(tag);
        std::fs::create_dir_all(&dir).expect("twin dir");
        let mut twin =
            Self::start_at(dir, self.keys_file.clone(), free_port(), clients, &self.more);
        twin.more = self.more.clone();
        twin
    }

    /// Stops this provider and starts it again on the same port with new keys.
    pub fn rotate_keys(mut self, clients: &[IdpClient]) -> Provider {
        self.stop();
        drop(std::fs::remove_file(&self.keys_file));
        let (dir, keys, port) = (self.dir.clone(), self.keys_file.clone(), self.port);
        let more = std::mem::take(&mut self.more);
        let mut restarted = Self::start_at(dir, keys, port, clients, &more);
        restarted.more = more;
        restarted
    }

    fn start_at(
        dir: PathBuf,
        keys_file: PathBuf,
        port: u16,
        clients: &[IdpClient],
        more: &serde_json::Value,
    ) -> Provider {
        let issuer = format!("http://127.0.0.1:{port}");
        let clients: Vec<serde_json::Value> = clients
            .iter()
            .map(|c| {
                serde_json::json!({ "client_id": c.id, "client_secret": c.secret, "claims": c.claims })
            })
            .collect();
        let mut config = serde_json::json!({
            "port": port, "issuer": issuer, "keys_file": keys_file, "clients": clients,
        });
        if let (Some(config), Some(more)) = (config.as_object_mut(), more.as_object()) {
            config.extend(more.clone());
        }
        let config_file = dir.join("provider.json");
        std::fs::write(&config_file, config.to_string()).expect("provider config");
        let mut child = Command::new("node")
            .env("SQLTUNNEL_IDP_MODULES", modules())
            .arg(script())
            .arg("serve")
            .arg(&config_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        let started = Instant::now();
        BufReader::new(stdout).read_line(&mut line).expect("provider output");
        assert!(line.starts_with("ready "), "the provider did not start: {line:?}");
        assert!(started.elapsed() < Duration::from_secs(30));
        Provider { child, issuer, keys_file, dir, port, more: serde_json::Value::Null }
    }

    fn stop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
    }

    /// The JWKS URL.
    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    /// The argv of a `token_command` printing a token of `client` for `resource`.
    pub fn token_command(&self, client: &IdpClient, resource: &str) -> Vec<String> {
        let script = script().display().to_string();
        let args = ["token", &self.issuer, client.id, client.secret, resource];
        ["node", script.as_str()].into_iter().chain(args).map(str::to_owned).collect()
    }

    /// A new access token of `client` for `resource`.
    pub async fn token(&self, client: &IdpClient, resource: &str) -> String {
        let argv = self.token_command(client, resource);
        let output = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .await
            .expect("token command");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).expect("utf-8").trim().to_owned()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop();
    }
}
