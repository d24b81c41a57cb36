//! The house rules the build checks (issue 54): README is the front door, at most 450 lines (what
//! it is, the two commands, clients, deploy, chains, the settings table and the examples; the
//! rest in docs/), and every local Markdown link from README reaches a file; the layering of
//! docs/architecture.md (nothing imports upward, no import circle between modules or between the
//! files of one), and no function in `src/` over 80 lines.

/// The tree the rules read: this checkout, or `HOUSE_RULES_ROOT` (another checkout of the
/// repository, to show a rule failing on a commit that breaks it without building that commit).
fn root() -> std::path::PathBuf {
    std::env::var_os("HOUSE_RULES_ROOT")
        .map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), Into::into)
}

#[test]
fn readme_is_the_front_door_at_most_450_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 450,
        "README.md has {lines} lines: move details to docs/ (at most 450)"
    );
}

#[test]
fn every_local_link_of_the_readme_and_docs_reaches_a_file() {
    let mut pages = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
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

/// The source tree read as Rust (syn): each file of `src/` (the library; `src/bin/` is its own
/// crate), its module path, and what it names.
mod source {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use syn::visit::Visit;

    /// One file of the library: its path under the repository, its module path (`["ordering",
    /// "tx"]` for `src/ordering/tx.rs`, `[]` for `src/lib.rs`), and its parsed text.
    pub struct File {
        pub path: String,
        pub module: Vec<String>,
        pub syntax: syn::File,
    }

    /// Every `.rs` file under `dir`, recursively, sorted.
    pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        out.sort();
        out
    }

    /// The library's files (`src/` without `src/bin/`) outside test-only code, parsed: a file
    /// declared `#[cfg(test)] mod tests;` (and any under it) is left out.
    pub fn library(root: &Path) -> Vec<File> {
        let files = all_library_files(root);
        let test_modules: Vec<Vec<String>> = files
            .iter()
            .flat_map(|f| {
                f.syntax.items.iter().filter_map(move |item| match item {
                    syn::Item::Mod(m) if m.content.is_none() && is_test(&m.attrs) => {
                        let mut module = f.module.clone();
                        module.push(m.ident.to_string());
                        Some(module)
                    }
                    _ => None,
                })
            })
            .collect();
        files
            .into_iter()
            .filter(|f| !test_modules.iter().any(|t| f.module.starts_with(t)))
            .collect()
    }

    fn all_library_files(root: &Path) -> Vec<File> {
        let src = root.join("src");
        rust_files(&src)
            .into_iter()
            .filter(|p| !p.starts_with(src.join("bin")))
            .map(|p| {
                let rel = p.strip_prefix(&src).unwrap();
                let mut module: Vec<String> = rel
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect();
                let last = module.pop().unwrap();
                if last != "mod.rs" && last != "lib.rs" {
                    module.push(last.trim_end_matches(".rs").to_string());
                }
                File {
                    path: p.strip_prefix(root).unwrap().display().to_string(),
                    module,
                    syntax: parse(&p),
                }
            })
            .collect()
    }

    /// A file parsed by syn; a file syn cannot read fails the test with its error.
    pub fn parse(path: &Path) -> syn::File {
        let text = std::fs::read_to_string(path).unwrap();
        syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Whether attributes mark test-only code: `#[cfg(test)]` or `#[test]`.
    pub fn is_test(attrs: &[syn::Attribute]) -> bool {
        attrs.iter().any(|a| {
            a.path().is_ident("test")
                || (a.path().is_ident("cfg")
                    && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
        })
    }

    /// Every path a file names that starts at `crate`, `super` or `self` (a `use`, an expression, a
    /// type, a macro's tokens), outside test-only code, as its segments.
    pub fn named_paths(file: &syn::File) -> Vec<Vec<String>> {
        let mut names = Names(Vec::new());
        names.visit_file(file);
        names.0
    }

    struct Names(Vec<Vec<String>>);

    impl Names {
        fn keep(&mut self, segments: Vec<String>) {
            let rooted = matches!(
                segments.first().map(String::as_str),
                Some("crate" | "super" | "self")
            );
            if rooted && segments.len() > 1 {
                self.0.push(segments);
            }
        }

        /// `crate::a::b` inside a macro's tokens (`format!`, `matches!`, ...), which syn leaves
        /// unparsed.
        fn tokens(&mut self, stream: proc_macro2::TokenStream) {
            let tokens: Vec<proc_macro2::TokenTree> = stream.into_iter().collect();
            let mut i = 0;
            while i < tokens.len() {
                match &tokens[i] {
                    proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                    proc_macro2::TokenTree::Ident(id) if id == "crate" || id == "super" => {
                        let mut path = vec![id.to_string()];
                        let mut j = i + 1;
                        while let (
                            Some(proc_macro2::TokenTree::Punct(a)),
                            Some(proc_macro2::TokenTree::Punct(b)),
                        ) = (tokens.get(j), tokens.get(j + 1))
                        {
                            if a.as_char() != ':' || b.as_char() != ':' {
                                break;
                            }
                            match tokens.get(j + 2) {
                                Some(proc_macro2::TokenTree::Ident(next)) => {
                                    path.push(next.to_string())
                                }
                                _ => break,
                            }
                            j += 3;
                        }
                        self.keep(path);
                        i = j.max(i + 1);
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
        }
    }

    impl<'ast> Visit<'ast> for Names {
        fn visit_item(&mut self, item: &'ast syn::Item) {
            if !is_test(item_attrs(item)) {
                syn::visit::visit_item(self, item);
            }
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            if !is_test(&f.attrs) {
                syn::visit::visit_impl_item_fn(self, f);
            }
        }
        fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
            for (_, path) in use_paths(&u.tree) {
                self.keep(path);
            }
        }
        fn visit_path(&mut self, p: &'ast syn::Path) {
            self.keep(p.segments.iter().map(|s| s.ident.to_string()).collect());
            syn::visit::visit_path(self, p);
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.tokens(m.tokens.clone());
            syn::visit::visit_macro(self, m);
        }
    }

    /// An item's attributes (those of the kinds a crate's items are; others have none here).
    pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
        match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        }
    }

    /// Which module a path names from `module`: `crate`, `super` and `self` taken, then each
    /// segment that is a module (a file or a folder), then an item that a module re-exports
    /// (`pub use sub::Item`) followed to the file that holds it.
    pub struct Resolver<'a> {
        pub src: &'a Path,
        /// For each module, the names it re-exports and the path each comes from.
        pub exports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    }

    impl<'a> Resolver<'a> {
        pub fn new(src: &'a Path, files: &[File]) -> Self {
            let mut exports = BTreeMap::new();
            for f in files {
                let mut names = BTreeMap::new();
                for item in &f.syntax.items {
                    if let syn::Item::Use(u) = item {
                        if !matches!(u.vis, syn::Visibility::Inherited) && !is_test(&u.attrs) {
                            for (name, mut path) in use_paths(&u.tree) {
                                // `pub use sub::Item;` names no root: `self::sub::Item`.
                                if !matches!(path[0].as_str(), "crate" | "super" | "self") {
                                    path.insert(0, "self".into());
                                }
                                if name != "*" && path.len() > 1 {
                                    names.insert(name, path);
                                }
                            }
                        }
                    }
                }
                exports.insert(f.module.clone(), names);
            }
            Resolver { src, exports }
        }

        fn is_module(&self, module: &[String]) -> bool {
            let dir = module.iter().fold(self.src.to_path_buf(), |d, s| d.join(s));
            dir.with_extension("rs").is_file() || dir.join("mod.rs").is_file()
        }

        /// The module `path` (named in `from`) lands in.
        pub fn resolve(&self, from: &[String], path: &[String]) -> Vec<String> {
            self.resolve_depth(from, path, 0)
        }

        fn resolve_depth(&self, from: &[String], path: &[String], depth: usize) -> Vec<String> {
            let mut module: Vec<String> = match path[0].as_str() {
                "crate" => Vec::new(),
                _ => from.to_vec(),
            };
            let mut rest = &path[1..];
            if path[0] == "super" {
                module.pop();
                while rest.first().is_some_and(|s| s == "super") {
                    module.pop();
                    rest = &rest[1..];
                }
            }
            while let Some(segment) = rest.first() {
                let mut next = module.clone();
                next.push(segment.clone());
                if !self.is_module(&next) {
                    break;
                }
                module = next;
                rest = &rest[1..];
            }
            if let (Some(item), true) = (rest.first(), depth < 8) {
                if let Some(source) = self.exports.get(&module).and_then(|e| e.get(item)) {
                    return self.resolve_depth(&module, source, depth + 1);
                }
            }
            module
        }
    }

    /// Every path a `use` tree names, with the name it brings in: `use a::{b::C, D as E}` gives
    /// (`C`, a::b::C) and (`E`, a::D); a glob `a::*` gives (`*`, a).
    fn use_paths(tree: &syn::UseTree) -> Vec<(String, Vec<String>)> {
        fn walk(
            tree: &syn::UseTree,
            prefix: &mut Vec<String>,
            out: &mut Vec<(String, Vec<String>)>,
        ) {
            let with = |prefix: &[String], last: &syn::Ident| {
                let mut path = prefix.to_vec();
                path.push(last.to_string());
                path
            };
            match tree {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    walk(&p.tree, prefix, out);
                    prefix.pop();
                }
                syn::UseTree::Name(n) => out.push((n.ident.to_string(), with(prefix, &n.ident))),
                syn::UseTree::Rename(r) => out.push((r.rename.to_string(), with(prefix, &r.ident))),
                syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
                syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, prefix, out)),
            }
        }
        let mut out = Vec::new();
        walk(tree, &mut Vec::new(), &mut out);
        out
    }
}

/// The layers of docs/architecture.md ("Layers"), top first: a module may name modules of its own
/// layer or below, never above. A leaf (4) is what anything may use.
const LAYERS: &[(&str, u8)] = &[
    ("edge", 1),
    ("relay", 2),
    ("access", 2),
    ("websocket", 2),
    ("config", 2),
    ("chain_id", 2),
    ("admin", 2),
    ("ordering", 3),
    ("upstream", 3),
    ("cache", 3),
    ("transaction", 3),
    ("hardfork", 3),
    ("jsonrpc", 3),
    ("signature", 3),
    ("canonical_rlp", 3),
    ("hex", 4),
    ("address", 4),
    ("log", 4),
    ("metrics", 4),
];

/// Every "module uses module" edge, at every level: for a name from module `a::b::x` to
/// `a::c::y`, the edge `b -> c` inside `a` (the first segments where the two differ), with one
/// example of the name that makes it. A name from a module into its own parent or child (a folder's
/// `mod.rs` is its face) is no edge.
type Edges =
    std::collections::BTreeMap<Vec<String>, std::collections::BTreeMap<(String, String), String>>;

fn import_edges() -> Edges {
    let root = &root();
    let files = source::library(root);
    let src = root.join("src");
    let resolver = source::Resolver::new(&src, &files);
    let mut edges = Edges::new();
    for f in &files {
        for path in source::named_paths(&f.syntax) {
            let to = resolver.resolve(&f.module, &path);
            let common = f.module.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if let (Some(a), Some(b)) = (f.module.get(common), to.get(common)) {
                edges
                    .entry(f.module[..common].to_vec())
                    .or_default()
                    .entry((a.clone(), b.clone()))
                    .or_insert_with(|| format!("{} names {}", f.path, path.join("::")));
            }
        }
    }
    edges
}

/// The circles of one graph (its strongly connected parts with more than one node), each as its
/// nodes.
fn circles(edges: &std::collections::BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
        next.entry(b).or_default();
    }
    // Which nodes each node reaches; two nodes that reach each other are on one circle.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for &m in &next[n] {
                if seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|&n| (n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut placed = BTreeSet::new();
    for &n in next.keys() {
        if placed.contains(n) || !reaches[n].contains(n) {
            continue;
        }
        let part: Vec<String> = next
            .keys()
            .filter(|&&m| reaches[n].contains(m) && reaches[m].contains(n))
            .map(|m| m.to_string())
            .collect();
        placed.extend(part.iter().cloned());
        out.push(part);
    }
    out
}

#[test]
fn nothing_imports_upward() {
    let edges = import_edges();
    let layer = |m: &str| {
        LAYERS.iter().find(|(n, _)| *n == m).map(|(_, l)| *l).unwrap_or_else(|| {
            panic!("src/{m}: a module of no layer; add it to LAYERS here and to docs/architecture.md")
        })
    };
    let upward: Vec<&String> = edges
        .get(&Vec::new())
        .into_iter()
        .flatten()
        .filter(|((a, b), _)| layer(b) < layer(a))
        .map(|(_, example)| example)
        .collect();
    assert!(
        upward.is_empty(),
        "imports upward (docs/architecture.md, Layers): {upward:#?}"
    );
}

#[test]
fn no_import_circle_between_modules_or_the_files_of_one() {
    let mut found = Vec::new();
    for (inside, graph) in import_edges() {
        for circle in circles(&graph) {
            let examples: Vec<&String> = graph
                .iter()
                .filter(|((a, b), _)| circle.contains(a) && circle.contains(b))
                .map(|(_, e)| e)
                .collect();
            found.push(format!(
                "in src/{}: {} ({examples:?})",
                inside.join("/"),
                circle.join(" <-> ")
            ));
        }
    }
    assert!(
        found.is_empty(),
        "import circles: put the shared piece below both sides\n{}",
        found.join("\n")
    );
}

/// At most this many lines from a function's signature to its closing brace (doc comments not
/// counted).
const MAX_FUNCTION_LINES: usize = 80;

#[test]
fn no_function_over_80_lines() {
    use syn::spanned::Spanned;
    use syn::visit::Visit;
    struct Long<'a>(&'a str, Vec<String>);
    impl Long<'_> {
        fn check(&mut self, vis: &syn::Visibility, sig: &syn::Signature, block: &syn::Block) {
            let start = match vis {
                syn::Visibility::Inherited => sig.span().start().line,
                v => v.span().start().line,
            };
            let lines = block.brace_token.span.close().end().line + 1 - start;
            if lines > MAX_FUNCTION_LINES {
                self.1
                    .push(format!("{}:{start} {} ({lines} lines)", self.0, sig.ident));
            }
        }
    }
    impl<'ast> Visit<'ast> for Long<'_> {
        fn visit_item(&mut self, item: &'ast syn::Item) {
            if !source::is_test(source::item_attrs(item)) {
                syn::visit::visit_item(self, item);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.check(&f.vis, &f.sig, &f.block);
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            if !source::is_test(&f.attrs) {
                self.check(&f.vis, &f.sig, &f.block);
                syn::visit::visit_impl_item_fn(self, f);
            }
        }
        fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
            if let Some(block) = &f.default {
                self.check(&syn::Visibility::Inherited, &f.sig, block);
            }
            syn::visit::visit_trait_item_fn(self, f);
        }
    }
    let root = &root();
    let mut files: Vec<(String, syn::File)> = source::library(root)
        .into_iter()
        .map(|f| (f.path, f.syntax))
        .collect();
    for path in source::rust_files(&root.join("src").join("bin")) {
        files.push((
            path.strip_prefix(root).unwrap().display().to_string(),
            source::parse(&path),
        ));
    }
    let mut long = Vec::new();
    for (name, syntax) in &files {
        let mut v = Long(name, Vec::new());
        v.visit_file(syntax);
        long.extend(v.1);
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines: split each into steps named as the field names them\n{}",
        long.join("\n")
    );
}
