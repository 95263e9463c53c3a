//! The docs stay true about the code's layout: every file or folder that ARCHITECTURE.md, the
//! README, CONTRIBUTING.md and docs/ (subfolders too) name in backticks (`transport/src/steps.rs`,
//! `relay/`, `digest.rs`) exists in the tree, as a path or as the end of one. `layers.rs`: the
//! layering each crate's `lib.rs` states holds.

#[path = "docs/layers.rs"]
mod layers;

use std::path::{Path, PathBuf};

/// Every file and folder below `dir`, as paths relative to the repository root.
fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
        if path.is_dir() {
            out.push(format!("{rel}/"));
            walk(root, &path, out);
        } else {
            out.push(rel);
        }
    }
}

/// Backticked names in `text` that look like a file or a folder of this repository.
fn cited(text: &str) -> Vec<String> {
    const KINDS: [&str; 8] = [".rs", ".sh", ".md", ".yaml", ".conf", ".java", ".py", ".js"];
    text.split('`')
        .skip(1)
        .step_by(2)
        // Not paths on a user's machine, nor what a build or the test script makes.
        .filter(|t| !t.contains(' ') && !t.contains('*') && !t.contains("://"))
        .filter(|t| !t.starts_with(['/', '~', '%', '$']))
        .filter(|t| !t.starts_with("target/") && *t != "dist/")
        .filter(|t| t.ends_with('/') || KINDS.iter().any(|k| t.ends_with(k)))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_file_the_docs_name_exists() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().expect("root");
    let mut tree = Vec::new();
    walk(&root, &root, &mut tree);
    let mut docs =
        vec![root.join("ARCHITECTURE.md"), root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut in_docs = Vec::new();
    walk(&root, &root.join("docs"), &mut in_docs);
    docs.extend(in_docs.iter().filter(|p| !p.ends_with('/')).map(|p| root.join(p)));
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("a doc");
        for name in cited(&text) {
            let found = tree.iter().any(|p| *p == name || p.ends_with(&format!("/{name}")));
            if !found {
                missing.push(format!("{}: `{name}`", doc.display()));
            }
        }
    }
    assert!(missing.is_empty(), "the docs name what does not exist:\n{}", missing.join("\n"));
}

/// The keys the table of `## {section}` in `docs/reference/config.md` documents, dotted
/// (`upstreams[].tls.ca_file`); a row's alternatives (`` `a.b` / `c` ``) share the first one's
/// parent.
fn documented_keys(section: &str) -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("docs/reference/config.md")).expect("config.md");
    let start = text.find(&format!("\n## {section}\n")).expect("the section");
    let body = &text[start + 1..];
    let body = &body[..body[3..].find("\n## ").map_or(body.len(), |end| end + 3)];
    let mut keys = Vec::new();
    for row in body.lines().filter(|l| l.starts_with("| `")) {
        let first_cell = row.split('|').nth(1).unwrap_or_default();
        let names: Vec<&str> = first_cell.split('`').skip(1).step_by(2).collect();
        let parent = names.first().and_then(|n| n.rsplit_once('.')).map(|(p, _)| p);
        for name in names {
            match parent {
                Some(parent) if !name.contains('.') => keys.push(format!("{parent}.{name}")),
                _ => keys.push(name.to_owned()),
            }
        }
    }
    keys
}

/// A YAML document that sets `key` (dotted, `[]` for a list's entries) to a value no key
/// takes, so that parsing it says whether the key exists (a wrong value) or not (unknown).
fn yaml_setting(key: &str) -> String {
    let parts: Vec<&str> = key.split('.').collect();
    let (mut out, mut indent, mut inline) = (String::new(), 0, false);
    for (i, part) in parts.iter().enumerate() {
        let pad = if inline { String::new() } else { " ".repeat(indent) };
        inline = false;
        let (name, list) = part.strip_suffix("[]").map_or((*part, false), |n| (n, true));
        if i + 1 == parts.len() {
            out.push_str(&format!("{pad}{name}: [[[]]]\n"));
        } else if list {
            out.push_str(&format!("{pad}{name}:\n{}  - ", " ".repeat(indent)));
            (indent, inline) = (indent + 4, true);
        } else {
            out.push_str(&format!("{pad}{name}:\n"));
            indent += 2;
        }
    }
    out
}

/// The leaf keys of a parsed YAML document, dotted, `[]` for a list of mappings.
fn leaf_keys(value: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                match inner {
                    serde_json::Value::Object(_) => leaf_keys(inner, &path, out),
                    serde_json::Value::Array(items) if items.iter().any(|i| i.is_object()) => {
                        for item in items {
                            leaf_keys(item, &format!("{path}[]"), out);
                        }
                    }
                    _ => out.push(path),
                }
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

/// Config maps whose keys the user names (`oidc.groups.<group>`).
const FREE_MAPS: [&str; 1] = ["oidc.groups"];

/// Checks one binary's keys: each documented key exists in its config struct, and each key of
/// its example config is documented.
fn keys_match<C: serde::de::DeserializeOwned>(section: &str, example: &str) -> Vec<String> {
    let exists = |key: &str| match common::config::parse_yaml::<C>(&yaml_setting(key)) {
        Ok(_) => true,
        Err(e) => !e.to_string().contains("unknown"),
    };
    assert!(!exists("zz_not_a_key"), "the check tells a missing key");
    assert!(!exists("log.zz_not_a_key"), "the check tells a missing nested key");
    let documented = documented_keys(section);
    assert!(documented.len() > 10, "{section}: {documented:?}");
    let mut wrong: Vec<String> = documented
        .iter()
        .filter(|k| !exists(k))
        .map(|k| format!("{section}: `{k}` is documented but not a key"))
        .collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("configs").join(example)).expect("example");
    let parsed: serde_json::Value = common::config::parse_yaml(&text).expect("example parses");
    let mut used = Vec::new();
    leaf_keys(&parsed, "", &mut used);
    // A map whose keys are the user's own (group names) is documented as a whole.
    let own_keys = |k: &str| FREE_MAPS.iter().any(|m| k.starts_with(&format!("{m}.")));
    wrong.extend(
        used.into_iter()
            .filter(|k| !documented.contains(k) && !own_keys(k))
            .map(|k| format!("{example}: `{k}` is not in docs/reference/config.md")),
    );
    wrong
}

#[test]
fn every_config_key_is_documented_and_every_documented_key_exists() {
    let mut wrong = keys_match::<transport::TransportConfig>("transport", "transport.example.yaml");
    wrong.extend(keys_match::<transport::TransportConfig>(
        "transport",
        "transport.identities.example.yaml",
    ));
    wrong.extend(keys_match::<sidecar::SidecarConfig>("sidecar", "sidecar.example.yaml"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The example configs show every key, set or commented: each key documented in a section of
/// docs/reference/config.md is named, as a word, in that binary's examples.
#[test]
fn every_documented_key_is_in_an_example_config() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let read = |f: &str| std::fs::read_to_string(root.join(f)).expect("example");
    let transport = read("transport.example.yaml") + &read("transport.identities.example.yaml");
    let sidecar = read("sidecar.example.yaml");
    let mut missing = Vec::new();
    for (section, text) in [("transport", &transport), ("sidecar", &sidecar)] {
        let words: Vec<&str> = text.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
        for key in documented_keys(section) {
            let leaf = key.rsplit('.').next().unwrap_or(&key).trim_end_matches("[]");
            if !words.contains(&leaf) {
                missing.push(format!("{section}: `{key}` is in no example config"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Every source file below `dir` (`.rs`), concatenated.
fn sources(dir: &Path) -> String {
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files
        .iter()
        .filter(|f| f.ends_with(".rs"))
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
        .collect()
}

#[test]
fn every_error_code_the_troubleshooting_table_names_can_be_produced() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let table = std::fs::read_to_string(root.join("docs/troubleshooting.md")).expect("doc");
    let codes_file = std::fs::read_to_string(root.join("common/src/mysql/mod.rs")).expect("codes");
    let block = &codes_file[codes_file.find("pub mod error_code").expect("error codes")..];
    // NAME = value, for the codes the tunnel reports itself.
    let constants: Vec<(&str, &str)> = block
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            Some((name, rest.rsplit_once("= ")?.1.trim_end_matches(';')))
        })
        .collect();
    let code = [root.join("sidecar/src"), root.join("transport/src"), root.join("common/src")]
        .iter()
        .map(|dir| sources(dir))
        .collect::<String>();
    let mut wrong = Vec::new();
    let mut rows = 0;
    for row in table.lines().filter(|l| {
        l.len() > 6 && l.starts_with("| ") && l[2..6].bytes().all(|b| b.is_ascii_digit())
    }) {
        rows += 1;
        let number = &row[2..6];
        let used = constants.iter().filter(|(_, value)| *value == number).any(|(name, _)| {
            code.matches(&format!("code::{name}")).count()
                + code.matches(&format!("error_code::{name}")).count()
                > 0
        });
        // The server's own errors, relayed, are the database's to produce.
        let relayed = row.contains("the server's own") || row.contains("from the database");
        if !used && !relayed {
            wrong.push(format!("{number}: no code of the tunnel produces it: {row}"));
        }
    }
    assert!(rows >= 10, "the table's rows were found ({rows})");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The metric families an exposition declares (`# TYPE name type`), by the name a query uses:
/// a counter's with `_total`.
fn families(exposition: &str) -> Vec<String> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| if kind == "counter" { format!("{name}_total") } else { name.into() })
        .collect()
}

/// The first cells of the tables of `## Metrics` in docs/operations.md, and the section.
fn documented_metrics() -> (Vec<String>, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("docs/operations.md")).expect("operations.md");
    let start = text.find("\n## Metrics\n").expect("the section");
    let body = &text[start + 1..];
    let body = &body[..body[3..].find("\n## ").map_or(body.len(), |end| end + 3)];
    let names = body
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .map(str::to_owned)
        .collect();
    (names, body.to_owned())
}

/// The labels a crate's `fn kind_label` gives its errors (`error.rs`).
fn error_kinds(crate_dir: &str) -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let text =
        std::fs::read_to_string(root.join(crate_dir).join("src/error.rs")).expect("error.rs");
    let body = &text[text.find("fn kind_label").expect("kind_label")..];
    let body = &body[..body.find("\n    }\n").expect("its end")];
    body.lines()
        .filter_map(|l| l.split("=> \"").nth(1)?.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_metric_family_and_error_kind_is_documented_and_every_documented_one_exists() {
    // A family is written once it has a member.
    let transport = transport::metrics::Metrics::new();
    transport.error("internal");
    transport.session_opened("alice");
    transport.identity_limited("alice", "max_sessions_per_token");
    transport.upstream_ready.get_or_create(&vec![("upstream".into(), "main".into())]).set(1);
    let transport = transport.render((0, 0), 0, &[]);
    let sidecar = sidecar::metrics::Metrics::default();
    sidecar.error("config");
    let sidecar = sidecar.render();
    let exported: Vec<String> =
        families(&transport).into_iter().chain(families(&sidecar)).collect();
    assert!(exported.len() > 30, "{exported:?}");
    let (documented, section) = documented_metrics();
    let mut wrong: Vec<String> = exported
        .iter()
        .filter(|m| !documented.contains(m))
        .map(|m| format!("`{m}` is exported but not in docs/operations.md's Metrics"))
        .collect();
    wrong.extend(
        documented
            .iter()
            .filter(|m| !exported.contains(m))
            .map(|m| format!("`{m}` is documented but no binary exports it")),
    );
    for krate in ["transport", "sidecar"] {
        let kinds = error_kinds(krate);
        assert!(kinds.len() > 10, "{krate}: {kinds:?}");
        wrong.extend(
            kinds
                .iter()
                .filter(|k| !section.contains(&format!("`{k}`")))
                .map(|k| format!("{krate}'s error kind `{k}` is not in docs/operations.md")),
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What `scripts/release.sh` packs beside the binaries (its `DOCS=(…)`).
fn shipped_docs(root: &Path) -> Vec<String> {
    let script = std::fs::read_to_string(root.join("scripts/release.sh")).expect("release.sh");
    let line = script.lines().find_map(|l| l.strip_prefix("DOCS=(")).expect("DOCS=(…)");
    line.trim_end_matches(')').split_whitespace().map(str::to_owned).collect()
}

/// Every relative link of the markdown files a release archive carries leads to a file or
/// folder the archive carries: the README's and docs/'s links work in the unpacked archive.
#[test]
fn every_link_of_the_shipped_docs_works_in_the_release_archive() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("root");
    let shipped = shipped_docs(&root);
    assert!(shipped.iter().any(|s| s == "docs") && shipped.iter().any(|s| s == "README.md"));
    let mut files = Vec::new();
    for entry in &shipped {
        if root.join(entry).is_dir() {
            walk(&root, &root.join(entry), &mut files);
        } else {
            files.push(entry.clone());
        }
    }
    let inside = |path: &Path| {
        let rel = path.strip_prefix(&root).map(|p| p.to_string_lossy().into_owned());
        rel.is_ok_and(|rel| shipped.iter().any(|s| rel == *s || rel.starts_with(&format!("{s}/"))))
    };
    let mut wrong = Vec::new();
    for file in files.iter().filter(|f| f.ends_with(".md")) {
        let text = std::fs::read_to_string(root.join(file)).expect("doc");
        for link in text.split("](").skip(1).filter_map(|l| l.split([')', ' ']).next()) {
            let target = link.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let path = root.join(file).parent().expect("folder").join(target);
            match path.canonicalize() {
                Ok(path) if inside(&path) => {}
                Ok(_) => wrong.push(format!("{file}: ({link}) is not in the archive")),
                Err(_) => wrong.push(format!("{file}: ({link}) does not exist")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
