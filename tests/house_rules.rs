//! The house rules the build checks (issue 54): README is the front door, at most 450 lines (what
//! it is, the two commands, clients, deploy, chains, the settings table and the examples; the
//! rest in docs/), and every local Markdown link from README reaches a file.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn readme_is_the_front_door_at_most_450_lines() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 450,
        "README.md has {lines} lines: move details to docs/ (at most 450)"
    );
}

#[test]
fn every_local_link_of_the_readme_and_docs_reaches_a_file() {
    let mut pages = vec![Path::new(ROOT).join("README.md")];
    for entry in std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || file.contains(' ') {
                continue;
            }
            if !page.parent().unwrap().join(file).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to no file: {broken:#?}");
}
