//! The docs stay true about the code's layout: every file or folder that ARCHITECTURE.md, the
//! README, CONTRIBUTING.md and docs/ (subfolders too) name in backticks (`transport/src/steps.rs`,
//! `relay/`, `digest.rs`) exists in the tree, as a path or as the end of one.

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
        .filter(|t| !t.starts_with('/') && !t.starts_with('~') && !t.starts_with("target/"))
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
