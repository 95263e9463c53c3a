//! The layering each crate's `lib.rs` states ("Layers, lowest first: … → … → …") holds: every
//! module is placed, and no module's code names a module of a higher layer (`crate::name`, in
//! a path or a `use crate::{…}` list). Test files (`*_tests.rs`) are left out.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// The layers `lib.rs` of `krate` states, lowest first: each a list of module names.
fn stated_layers(lib: &str) -> Vec<Vec<String>> {
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{} ", l.trim()))
        .collect();
    let (_, after) = doc.split_once("Layers, lowest first").expect("lib.rs states its layers");
    let (_, list) = after.split_once(':').expect("a colon before the layers");
    list.split('→').map(backticked_names).collect()
}

/// The names in backticks in `text` that are plain identifiers.
fn backticked_names(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .map(str::to_owned)
        .collect()
}

/// The modules `lib.rs` declares.
fn declared_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("mod ")))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// The crate's modules `source` names: `crate::name…`, and each item of `crate::{…}`.
fn named_modules(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in source.match_indices("crate::") {
        let rest = &source[i + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let (mut depth, mut item) = (0, String::new());
            for c in list.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.extend(leading_identifier(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            names.extend(leading_identifier(&item));
        } else {
            names.extend(leading_identifier(rest));
        }
    }
    names
}

fn leading_identifier(text: &str) -> Option<String> {
    let name: String =
        text.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

/// The source files of module `module` of the crate at `src` (its file and its folder's),
/// test files left out.
fn module_files(src: &Path, module: &str) -> Vec<std::path::PathBuf> {
    let mut files = vec![src.join(format!("{module}.rs"))];
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => dirs.push(path),
                false => files.push(path),
            }
        }
    }
    files.retain(|f| f.is_file() && f.extension().is_some_and(|e| e == "rs"));
    files.retain(|f| !f.to_string_lossy().ends_with("_tests.rs"));
    files
}

/// What breaks the layering of the crate in `krate`: modules not placed, and uses upward.
fn layering_faults(krate: &str) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut layer = HashMap::new();
    for (i, names) in stated_layers(&lib).into_iter().enumerate() {
        for name in names {
            layer.entry(name).or_insert(i);
        }
    }
    let mut faults = Vec::new();
    for module in declared_modules(&lib) {
        let Some(&own) = layer.get(&module) else {
            faults.push(format!("{krate}: `{module}` is in no layer of lib.rs"));
            continue;
        };
        for file in module_files(&src, &module) {
            let source = std::fs::read_to_string(&file).expect("a source file");
            for used in named_modules(&source) {
                if layer.get(&used).is_some_and(|&theirs| theirs > own) {
                    let file = file.strip_prefix(&src).unwrap_or(&file).display().to_string();
                    faults.push(format!("{krate}: {file} (layer {own}) uses `{used}` above it"));
                }
            }
        }
    }
    faults
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let faults: Vec<String> =
        ["sidecar", "transport"].iter().flat_map(|k| layering_faults(k)).collect();
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[test]
fn the_layering_check_sees_what_it_checks() {
    let lib = "//! Layers, lowest first: `a`, `b` (the b) → `c`\n\npub mod a;\nmod c;\n";
    assert_eq!(stated_layers(lib), vec![vec!["a", "b"], vec!["c"]]);
    assert_eq!(declared_modules(lib), vec!["a", "c"]);
    let source = "use crate::a::X;\nuse crate::{b, c::{D, E}, Error};\nfn f() { crate::d::g() }";
    let names: Vec<_> = named_modules(source).into_iter().collect();
    assert_eq!(names, vec!["Error", "a", "b", "c", "d"]);
}
