//! The docs cannot drift from the lists they describe. Every name of a list the code keeps
//! once (`DropReason::ALL`, `CoppClass::ALL`, each `keywords!` set) appears in the page that
//! documents it, in backticks or quoted as a config writes it, and the punt order written in
//! docs/ARCHITECTURE.md is `CoppClass::ALL`'s. A name added to a list and not to its page
//! fails here, naming both.

use raceway_core::config::{CoppClass, EcnMeasure, GroupMode, MarkOn, PauseRx, Trust, WatchdogAction};
use raceway_core::drops::DropReason;
use raceway_core::engine::fabric::dcqcn::DcqcnPreset;
use raceway_core::engine::fabric::transport::TransportKind;
use raceway_core::engine::fabric::workload::Workload;
use raceway_core::observe::report::Sampling;

const STATS: (&str, &str) = ("docs/STATS.md", include_str!("../../docs/STATS.md"));
const CONFIG: (&str, &str) = ("docs/CONFIG.md", include_str!("../../docs/CONFIG.md"));
const ARCHITECTURE: (&str, &str) = ("docs/ARCHITECTURE.md", include_str!("../../docs/ARCHITECTURE.md"));
const FABRIC: (&str, &str) = ("docs/FABRIC.md", include_str!("../../docs/FABRIC.md"));

/// Fails naming every name of `list` that `page` does not name.
fn names_all(page: (&str, &str), list: &str, names: impl IntoIterator<Item = &'static str>) {
    let (path, text) = page;
    let missing: Vec<&str> = names
        .into_iter()
        .filter(|name| !text.contains(&format!("`{name}`")) && !text.contains(&format!("\"{name}\"")))
        .collect();
    assert!(missing.is_empty(), "{path} does not name {list}'s {missing:?}");
}

#[test]
fn every_drop_reason_is_in_the_stats_contract_and_the_readmes_picture() {
    names_all(STATS, "DropReason", DropReason::ALL.iter().map(|reason| reason.name()));
    let readme = include_str!("../../README.md");
    let picture = &readme[readme.find("   drops: ").expect("the README's picture lists the drops")..];
    let picture = &picture[..picture.find("```").unwrap_or(picture.len())];
    let words: Vec<&str> = picture.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').collect();
    let missing: Vec<&str> =
        DropReason::ALL.iter().map(|reason| reason.name()).filter(|name| !words.contains(name)).collect();
    assert!(missing.is_empty(), "README.md's picture does not list the drops {missing:?}");
}

#[test]
fn every_copp_class_is_in_the_stats_the_config_and_the_punt_order() {
    let classes = || CoppClass::ALL.iter().map(|class| class.name());
    names_all(STATS, "CoppClass", classes());
    names_all(CONFIG, "CoppClass", classes());
    let (path, text) = ARCHITECTURE;
    let start = text.find("highest class that has one (in order: ").expect("ARCHITECTURE.md's punt order");
    let order = &text[start..text[start..].find(';').map_or(text.len(), |end| start + end)];
    let written: Vec<&str> = order.split('`').skip(1).step_by(2).collect();
    assert_eq!(written, classes().collect::<Vec<_>>(), "{path}'s punt order is CoppClass::ALL's");
}

#[test]
fn every_config_keyword_is_in_the_config_reference() {
    names_all(CONFIG, "Trust", Trust::ALL.iter().map(|word| word.name()));
    names_all(CONFIG, "GroupMode", GroupMode::ALL.iter().map(|word| word.name()));
    names_all(CONFIG, "MarkOn", MarkOn::ALL.iter().map(|word| word.name()));
    names_all(CONFIG, "EcnMeasure", EcnMeasure::ALL.iter().map(|word| word.name()));
    names_all(CONFIG, "PauseRx", PauseRx::ALL.iter().map(|word| word.name()));
    names_all(CONFIG, "WatchdogAction", WatchdogAction::ALL.iter().map(|word| word.name()));
}

#[test]
fn every_fabric_keyword_is_in_the_fabric_reference() {
    names_all(FABRIC, "Workload", Workload::ALL.iter().map(|word| word.name()));
    names_all(FABRIC, "DcqcnPreset", DcqcnPreset::ALL.iter().map(|word| word.name()));
    names_all(FABRIC, "TransportKind", TransportKind::ALL.iter().map(|word| word.name()));
    names_all(FABRIC, "Sampling", Sampling::ALL.iter().map(|word| word.name()));
}

/// Whether a path docs/ARCHITECTURE.md names exists: under `core/src/` (the page's default),
/// under `dataplane/src/` (the `raceway` crate's modules) or from the repository's top.
fn architecture_path_exists(path: &str) -> bool {
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    ["core/src", "dataplane/src", "."].iter().any(|base| top.join(base).join(path).exists())
}

/// Every path docs/ARCHITECTURE.md names in backticks (a word with a `/`; a bare file name is
/// read beside the folder the sentence names) exists, so the map cannot point at a room that
/// moved.
#[test]
fn every_path_the_architecture_page_names_exists() {
    let (page, text) = ARCHITECTURE;
    let looks_like_path =
        |word: &str| word.contains('/') && word.chars().all(|c| c.is_ascii_alphanumeric() || "/_.-".contains(c));
    let named: Vec<&str> = text.split('`').skip(1).step_by(2).filter(|word| looks_like_path(word)).collect();
    assert!(named.len() > 50, "{page}: only {} paths found; has the page's form changed?", named.len());
    let missing: Vec<&str> = named.into_iter().filter(|path| !architecture_path_exists(path)).collect();
    assert!(missing.is_empty(), "{page} names paths that do not exist: {missing:?}");
}

/// The scripts the docs name run as the docs say: every `perf/…` script named in the README
/// and docs/ exists, and every script in perf/ that is run rather than imported or sourced
/// (a `#!` line) carries its run bits, so `perf/NAME.sh` does not answer "Permission
/// denied" on a fresh clone.
#[test]
fn every_script_the_docs_name_exists_and_runs() {
    use std::os::unix::fs::PermissionsExt;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut named = Vec::new();
    let mut pages = vec![root.join("README.md")];
    pages.extend(std::fs::read_dir(root.join("docs")).unwrap().map(|entry| entry.unwrap().path()));
    for page in pages.iter().filter(|page| page.extension().is_some_and(|ext| ext == "md")) {
        let text = std::fs::read_to_string(page).unwrap();
        for (at, _) in text.match_indices("perf/") {
            let path: String =
                text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || "_-./".contains(*c)).collect();
            let path = path.trim_end_matches('.');
            if path.ends_with(".sh") || path.ends_with(".py") {
                named.push((page.display().to_string(), path.to_string()));
            }
        }
    }
    assert!(named.len() > 10, "the docs name the perf scripts: {named:?}");
    let missing: Vec<_> = named.iter().filter(|(_, path)| !root.join(path).is_file()).collect();
    assert!(missing.is_empty(), "named in the docs, not in the tree: {missing:?}");
    let mut scripts = vec![];
    let mut walk = vec![root.join("perf")];
    while let Some(directory) = walk.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk.push(path);
            } else if path.extension().is_some_and(|ext| ext == "sh" || ext == "py") {
                scripts.push(path);
            }
        }
    }
    let not_runnable: Vec<_> = scripts
        .iter()
        .filter(|path| std::fs::read_to_string(path).unwrap().starts_with("#!"))
        .filter(|path| std::fs::metadata(path).unwrap().permissions().mode() & 0o111 != 0o111)
        .collect();
    assert!(not_runnable.is_empty(), "scripts with a #! line but no run bits: {not_runnable:?}");
    // A script the docs tell the reader to run is runnable: a `#!` line, its run bits.
    let sourced = ["perf/lib.sh"];
    let unrunnable_named: Vec<_> = named
        .iter()
        .filter(|(_, path)| path.ends_with(".sh") && !sourced.contains(&path.as_str()))
        .filter(|(_, path)| !std::fs::read_to_string(root.join(path)).unwrap().starts_with("#!"))
        .collect();
    assert!(unrunnable_named.is_empty(), "named in the docs without a #! line: {unrunnable_named:?}");
}
