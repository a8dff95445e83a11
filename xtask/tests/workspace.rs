//! The workspace's written rules, checked: every dependency edge between its crates is one
//! docs/ARCHITECTURE.md's "Layers" table allows (read from `cargo metadata`), every crate is
//! licensed and unpublished (what deny.toml's `allow-wildcard-paths` relies on), and no two
//! files of a crate import each other, directly or around a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace root").to_path_buf()
}

/// The "Layers" table of docs/ARCHITECTURE.md: crate → layer, layer → layers it may use.
#[derive(Debug, Default)]
struct Layers {
    layer_of: BTreeMap<String, String>,
    may_use: BTreeMap<String, BTreeSet<String>>,
}

const WIRING: &str = "wiring";
const TEST_KIT: &str = "test kit";

fn parse_layers(doc: &str) -> Result<Layers, String> {
    let start = doc.find("\n## Layers").ok_or("docs/ARCHITECTURE.md has no \"## Layers\" section")?;
    let section = &doc[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut layers = Layers::default();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 3 || cells[0] == "layer" || cells[0].starts_with("---") {
            continue;
        }
        let layer = cells[0].to_string();
        // Crate names are the backticked words of the second column.
        for name in cells[1].split('`').skip(1).step_by(2) {
            if let Some(other) = layers.layer_of.insert(name.to_string(), layer.clone()) {
                return Err(format!("`{name}` stands in two layers: {other} and {layer}"));
            }
        }
        let uses = cells[2]
            .split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty() && *l != "-")
            .map(String::from)
            .collect();
        layers.may_use.insert(layer, uses);
    }
    for (layer, uses) in &layers.may_use {
        for used in uses {
            if !layers.may_use.contains_key(used) {
                return Err(format!("layer {layer} may use {used}, which is no layer"));
            }
        }
    }
    if layers.layer_of.is_empty() {
        return Err("the Layers table names no crate".into());
    }
    Ok(layers)
}

/// What `cargo metadata --no-deps` says of one workspace crate.
#[derive(Debug)]
struct Package {
    name: String,
    license: Option<String>,
    publish_nowhere: bool,
    /// (dependency, kind): kind is "normal", "dev" or "build".
    deps: Vec<(String, String)>,
    src: PathBuf,
}

fn packages(metadata: &serde_json::Value) -> Vec<Package> {
    let list = metadata["packages"].as_array().expect("cargo metadata lists packages");
    list.iter()
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"));
            Package {
                name: p["name"].as_str().expect("name").to_string(),
                license: p["license"].as_str().map(String::from),
                publish_nowhere: p["publish"].as_array().is_some_and(Vec::is_empty),
                deps: p["dependencies"]
                    .as_array()
                    .expect("dependencies")
                    .iter()
                    .map(|d| {
                        let name = d["name"].as_str().expect("dependency name").to_string();
                        let kind = d["kind"].as_str().unwrap_or("normal").to_string();
                        (name, kind)
                    })
                    .collect(),
                src: manifest.parent().expect("a manifest sits in its crate").join("src"),
            }
        })
        .collect()
}

/// Every way the workspace breaks the Layers table, one line each.
fn violations(layers: &Layers, packages: &[Package]) -> Vec<String> {
    let members: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut out = Vec::new();
    for name in layers.layer_of.keys() {
        if !members.contains(name.as_str()) {
            out.push(format!(
                "docs/ARCHITECTURE.md's Layers table names `{name}`, which is no crate of the workspace"
            ));
        }
    }
    for p in packages {
        if p.license.is_none() {
            out.push(format!("{}: no license (license.workspace = true)", p.name));
        }
        if !p.publish_nowhere {
            out.push(format!(
                "{}: not `publish = false` (publish.workspace = true); deny.toml's allow-wildcard-paths needs it",
                p.name
            ));
        }
        let Some(layer) = layers.layer_of.get(&p.name) else {
            out.push(format!(
                "{}: in no layer of docs/ARCHITECTURE.md's Layers table: add it to one",
                p.name
            ));
            continue;
        };
        for (dep, kind) in &p.deps {
            let Some(dep_layer) = layers.layer_of.get(dep) else {
                continue; // not a workspace crate, or reported above
            };
            let allowed = match kind.as_str() {
                "dev" => dep_layer != WIRING,
                _ => dep_layer != TEST_KIT && layers.may_use[layer].contains(dep_layer),
            };
            if !allowed {
                out.push(format!(
                    "{} ({layer}) -> {dep} ({dep_layer}), a {kind} dependency the Layers table does not allow",
                    p.name
                ));
            }
        }
    }
    out
}

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md")
}

#[test]
fn every_dependency_edge_is_one_the_architecture_allows() {
    let layers = parse_layers(&architecture()).unwrap_or_else(|e| panic!("{e}"));
    let found = violations(&layers, &packages(&metadata()));
    assert!(found.is_empty(), "\n{}\n", found.join("\n"));
}

#[test]
fn the_rule_refuses_an_edge_between_applications_and_a_crate_outside_the_table() {
    let doc = "intro\n## Layers\n\n| layer | crates | may depend on |\n|---|---|---|\n\
               | core | `c` | - |\n| applications | `a`, `b` | core |\n\
               | wiring | `w` | core, applications |\n| test kit | `t` | core |\n## Next\n| x | `z` | - |\n";
    let layers = parse_layers(doc).expect("the sample table parses");
    assert!(!layers.layer_of.contains_key("z"), "the table ends at the next section");
    let pkg = |name: &str, deps: &[(&str, &str)]| Package {
        name: name.into(),
        license: Some("Apache-2.0".into()),
        publish_nowhere: true,
        deps: deps.iter().map(|(d, k)| (d.to_string(), k.to_string())).collect(),
        src: PathBuf::new(),
    };
    let good = [
        pkg("c", &[]),
        pkg("a", &[("c", "normal"), ("b", "dev"), ("t", "dev")]),
        pkg("b", &[("c", "build")]),
        pkg("w", &[("a", "normal")]),
        pkg("t", &[("c", "normal")]),
    ];
    assert_eq!(violations(&layers, &good), Vec::<String>::new());
    let bad = [
        pkg("c", &[("a", "normal")]),
        pkg("a", &[("b", "normal"), ("w", "dev"), ("t", "normal")]),
        pkg("b", &[]),
        pkg("w", &[]),
        pkg("t", &[]),
        pkg("new", &[]),
    ];
    let found = violations(&layers, &bad);
    assert_eq!(found.len(), 5, "{found:#?}");
    assert!(found[0].starts_with("c (core) -> a (applications)"), "{found:#?}");
    assert!(found[1].starts_with("a (applications) -> b (applications), a normal"));
    assert!(found[2].starts_with("a (applications) -> w (wiring), a dev"));
    assert!(found[3].starts_with("a (applications) -> t (test kit), a normal"));
    assert!(found[4].starts_with("new: in no layer"));
    let mut unlicensed = pkg("c", &[]);
    unlicensed.license = None;
    unlicensed.publish_nowhere = false;
    assert_eq!(violations(&layers, &[unlicensed]).len(), 6); // 4 missing crates, 2 fields
}

// ---- import circles between the files of a crate ----

/// The crate's top-level modules (`src/NAME.rs` with `src/NAME/**`), each with its files; the
/// crate root and `src/bin` are left out (a root re-exports everything), as is a module named
/// `tests` (test code may use any module).
fn top_modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a readable source folder") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    if src.is_dir() {
        walk(src, &mut files);
    }
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("a path").as_os_str().to_string_lossy();
        let top = first.trim_end_matches(".rs").to_string();
        if rel.components().count() == 1 && (top == "lib" || top == "main") {
            continue;
        }
        if top == "bin" || top == "tests" {
            continue;
        }
        modules.entry(top).or_default().push(file);
    }
    modules
}

/// The source without comments and without `#[cfg(test)]` modules (test code may use anything).
fn without_tests(text: &str) -> String {
    let mut code: String =
        text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    while let Some(at) = code.find("#[cfg(test)]") {
        let rest = &code[at..];
        let item_end = match (rest.find('{'), rest.find(';')) {
            (Some(open), Some(semi)) if semi < open => at + semi + 1,
            (Some(open), _) => {
                let mut depth = 0usize;
                let mut end = code.len();
                for (i, c) in rest[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + open + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(semi)) => at + semi + 1,
            (None, None) => code.len(),
        };
        code.replace_range(at..item_end, "");
    }
    code
}

/// The first segments of every `crate::` path in `code` (`crate::{a, b::c}` gives a and b).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let word = |s: &str| -> String {
        s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `some_crate::`
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(group.split(',').map(word).filter(|w| !w.is_empty()));
        } else {
            let w = word(rest);
            if !w.is_empty() {
                out.insert(w);
            }
        }
    }
    out
}

/// Names the crate root re-exports (`pub use device::{Device, Settings};`), with their module.
fn root_reexports(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for root in ["lib.rs", "main.rs"] {
        let Ok(text) = std::fs::read_to_string(src.join(root)) else {
            continue;
        };
        let code = without_tests(&text);
        for stmt in code.split(';') {
            let stmt = stmt.trim();
            let Some(path) = stmt.strip_prefix("pub use ") else {
                continue;
            };
            let path = path.trim_start_matches("crate::").trim_start_matches("self::");
            let Some((module, names)) = path.split_once("::") else {
                continue;
            };
            let names = names.trim().trim_start_matches('{').trim_end_matches('}');
            for name in names.split(',') {
                let name = name.trim();
                let name = name.rsplit(" as ").next().unwrap_or(name).trim();
                let name = name.rsplit("::").next().unwrap_or(name);
                if !name.is_empty() && name != "*" {
                    out.insert(name.to_string(), module.trim().to_string());
                }
            }
        }
    }
    out
}

/// Module → modules it names, for one crate's top-level modules.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = top_modules(src);
    let reexports = root_reexports(src);
    let mut graph = BTreeMap::new();
    for (module, files) in &modules {
        let mut uses = BTreeSet::new();
        for file in files {
            let text = std::fs::read_to_string(file).expect("a readable source file");
            for first in crate_paths(&without_tests(&text)) {
                let target = reexports.get(&first).cloned().unwrap_or(first);
                if modules.contains_key(&target) && &target != module {
                    uses.insert(target);
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// The circles of `graph`: its strongly connected components of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        for w in &s.graph[v] {
            let w = w.as_str();
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s =
        State { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found.sort();
    s.found
}

/// Circles admitted as a debt, by crate (none now): each is a debt to cut, not a licence. The test fails when one grows, when a new one appears, and when one listed here is
/// gone (so the list only shrinks).
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[];

#[test]
fn no_import_circle_between_the_files_of_a_crate() {
    let mut found = Vec::new();
    for p in packages(&metadata()) {
        for circle in circles(&module_graph(&p.src)) {
            found.push(format!("{}: {}", p.name, circle.join(" ")));
        }
    }
    let known: Vec<String> =
        KNOWN_CIRCLES.iter().map(|(krate, modules)| format!("{krate}: {}", modules.join(" "))).collect();
    let new: Vec<&String> = found.iter().filter(|c| !known.contains(c)).collect();
    let gone: Vec<&String> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "import circles between top-level modules (crate: modules of one circle):\nnew: {new:#?}\n\
         gone from the code but still in KNOWN_CIRCLES: {gone:#?}"
    );
}

#[test]
fn the_circle_finder_sees_a_circle_through_a_reexport_and_skips_tests() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).expect("src/b");
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::{Thing, Other as O};\n");
    write("a.rs", "use crate::{b::B, Thing};\n// crate::c in a comment\n");
    write("b.rs", "mod inner;\n");
    write("b/inner.rs", "pub fn f() -> crate::a::A { todo!() }\n");
    write(
        "c.rs",
        "use netdojo_crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n    fn f() { {} }\n}\n",
    );
    let graph = module_graph(&src);
    assert_eq!(graph["a"], BTreeSet::from(["b".to_string(), "c".to_string()]));
    assert_eq!(graph["b"], BTreeSet::from(["a".to_string()]));
    assert!(graph["c"].is_empty(), "{graph:?}");
    assert_eq!(circles(&graph), vec![vec!["a".to_string(), "b".to_string()]]);
}
