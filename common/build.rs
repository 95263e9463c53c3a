//! Build script: the target triple and the git commit the binaries are built from, for
//! `--version` (`SQLTUNNEL_COMMIT` in the environment wins, e.g. for a build from a source
//! archive without `.git`).

use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=SQLTUNNEL_TARGET={target}");
    println!("cargo:rerun-if-env-changed=SQLTUNNEL_COMMIT");
    let commit = std::env::var("SQLTUNNEL_COMMIT").ok().filter(|c| !c.is_empty()).or_else(|| {
        let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        out.status.success().then(|| text.trim().to_owned())
    });
    println!("cargo:rustc-env=SQLTUNNEL_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
    // A commit moves the branch HEAD names; a checkout changes HEAD itself.
    println!("cargo:rerun-if-changed=../.git/HEAD");
    let head = std::fs::read_to_string("../.git/HEAD").unwrap_or_default();
    if let Some(branch) = head.trim().strip_prefix("ref: ") {
        println!("cargo:rerun-if-changed=../.git/{branch}");
    }
}
