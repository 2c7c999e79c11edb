//! The checked-in schema, the recipes in recipes/, the README and the book
//! (docs/) stay true: their links resolve and their examples are real.

use crate::common::{TracefsGuard, repo, text, trace_recipe};

#[test]
fn checked_in_schema_is_what_schema_prints() {
    let out = trace_recipe(&["schema"]);
    assert!(out.status.success());
    let checked_in = std::fs::read_to_string(repo().join("schema/recipe.schema.json")).unwrap();
    assert_eq!(
        text(&out.stdout).trim_end(),
        checked_in.trim_end(),
        "schema/recipe.schema.json is stale: run `cargo run -- schema > schema/recipe.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&checked_in).unwrap();
    assert_eq!(
        schema["additionalProperties"],
        serde_json::Value::Bool(false),
        "unknown top-level keys must be refused by the schema"
    );
    for key in [
        "name", "duration", "params", "buffer", "scope", "tracer", "kprobes", "uprobes", "events",
        "triggers", "stop", "output",
    ] {
        assert!(
            schema["properties"].get(key).is_some(),
            "schema lacks `{key}`"
        );
    }
}

fn recipes() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(repo().join("recipes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

/// The files of the book's Markdown source (docs/src), SUMMARY.md included.
fn book_chapters() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(repo().join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.sort();
    v
}

/// README.md and every chapter of the book: the documents whose links and
/// examples are kept true.
fn documents() -> Vec<std::path::PathBuf> {
    let mut v = vec![repo().join("README.md")];
    v.extend(book_chapters());
    v
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// "Two commands on a fresh machine" in the README and the book's
/// introduction: the test command is the line CI runs, and the run command
/// names a recipe that exists and checks clean here.
#[test]
fn readme_and_book_name_the_commands_ci_and_users_run() {
    let ci = read(&repo().join(".ci/run"));
    for doc in ["README.md", "docs/src/introduction.md"] {
        let body = read(&repo().join(doc));
        let section = body
            .split("\n## ")
            .find(|s| s.starts_with("Two commands on a fresh machine"))
            .unwrap_or_else(|| panic!("{doc} has a `Two commands on a fresh machine` section"));
        let commands: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("    "))
            .map(str::trim)
            .collect();
        assert_eq!(
            commands.len(),
            2,
            "{doc}: two commands, indented: {commands:?}"
        );
        let test_cmd = commands
            .iter()
            .find(|c| c.contains("scripts/test"))
            .unwrap_or_else(|| panic!("{doc} gives the test command"));
        assert!(
            ci.lines().any(|l| l.trim() == *test_cmd),
            "CI must run {doc}'s test command `{test_cmd}` as it is written"
        );
        let run_cmd = commands
            .iter()
            .find(|c| c.contains(" run "))
            .unwrap_or_else(|| panic!("{doc} gives a run command"));
        let recipe = run_cmd
            .strip_prefix("cargo run --release -- run ")
            .unwrap_or_else(|| {
                panic!("{doc}: `{run_cmd}` is not `cargo run --release -- run RECIPE`")
            });
        assert!(
            recipe.starts_with("recipes/"),
            "{doc}: {run_cmd} runs a recipe from recipes/"
        );
        let out = trace_recipe(&["check", repo().join(recipe).to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{doc}'s recipe `{recipe}` must check clean:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

/// The lines of `body` outside fenced code blocks (``` or ~~~), with their
/// 1-based line numbers.
fn prose_lines(body: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut v = Vec::new();
    for (i, line) in body.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            v.push((i + 1, line));
        }
    }
    v
}

/// The fenced code blocks of `body`, each as its lines.
fn code_blocks(body: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in body.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            match current.take() {
                Some(b) => blocks.push(b),
                None => current = Some(Vec::new()),
            }
        } else if let Some(b) = current.as_mut() {
            b.push(line);
        }
    }
    blocks
}

/// The id mdBook gives a heading: its text without Markdown marks, lowercase,
/// letters, digits, `_` and `-` kept, whitespace made `-`, the rest dropped;
/// a repeated id gets `-1`, `-2`, ... (mdBook's `normalize_id` and
/// `unique_id_from_content`).
fn heading_ids(body: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for (_, line) in prose_lines(body) {
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        let title = rest.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base: String = link_texts(title.trim())
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_ascii_lowercase())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let mut id = base.clone();
        let mut n = 1;
        while ids.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        ids.push(id);
    }
    ids
}

/// `text` with every `[label](target)` replaced by its label.
fn link_texts(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some((label, _, before, after)) = next_link(rest) {
        out.push_str(before);
        out.push_str(label);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The first inline link `[label](target)` of `s` outside code spans:
/// `(label, target, text before it, text after it)`.
fn next_link(s: &str) -> Option<(&str, &str, &str, &str)> {
    let mut in_code = false;
    let mut depth = 0usize;
    let mut open = None;
    for (i, c) in s.char_indices() {
        match c {
            '`' => in_code = !in_code,
            '[' if !in_code => {
                if depth == 0 {
                    open = Some(i);
                }
                depth += 1;
            }
            ']' if !in_code && depth > 0 => {
                depth -= 1;
                if depth == 0 && s[i + 1..].starts_with('(') {
                    let start = open?;
                    let close = s[i + 2..].find(')')? + i + 2;
                    return Some((
                        &s[start + 1..i],
                        &s[i + 2..close],
                        &s[..start],
                        &s[close + 1..],
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

/// Every relative link of the README and the book resolves: the file (or
/// folder) exists, and an anchor names a heading of the chapter it points
/// into, as mdBook makes its id. Links with a scheme (https:) are not fetched.
/// Every chapter is in SUMMARY.md, so mdBook builds it.
#[test]
fn readme_and_book_links_resolve() {
    let mut broken = Vec::new();
    for doc in documents() {
        let body = read(&doc);
        let dir = doc.parent().unwrap();
        for (n, line) in prose_lines(&body) {
            let mut rest = line;
            while let Some((_, target, _, after)) = next_link(rest) {
                rest = after;
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let file = if path.is_empty() {
                    doc.clone()
                } else {
                    dir.join(path)
                };
                let place = format!(
                    "{}:{n}: `{target}`",
                    doc.strip_prefix(repo()).unwrap().display()
                );
                if !file.exists() {
                    broken.push(format!("{place}: no such file {}", file.display()));
                } else if !anchor.is_empty() {
                    if file.extension().is_none_or(|e| e != "md") {
                        broken.push(format!(
                            "{place}: an anchor into a file that is not Markdown"
                        ));
                    } else if !heading_ids(&read(&file)).iter().any(|id| id == anchor) {
                        broken.push(format!(
                            "{place}: no heading with id `{anchor}` (ids: {})",
                            heading_ids(&read(&file)).join(", ")
                        ));
                    }
                }
            }
        }
    }
    let summary = read(&repo().join("docs/src/SUMMARY.md"));
    for chapter in book_chapters() {
        let name = chapter.file_name().unwrap().to_str().unwrap();
        if name != "SUMMARY.md" && !summary.contains(&format!("]({name})")) {
            broken.push(format!("docs/src/{name} is not in docs/src/SUMMARY.md"));
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The rows of the first table of `body` whose header is `| code | meaning |`.
fn exit_code_rows(body: &str) -> Vec<&str> {
    body.lines()
        .skip_while(|l| l.trim() != "| code | meaning |")
        .take_while(|l| l.starts_with('|'))
        .collect()
}

#[test]
fn readme_exit_codes_are_the_books() {
    let readme = read(&repo().join("README.md"));
    let book = read(&repo().join("docs/src/exit-codes.md"));
    assert!(
        exit_code_rows(&book).len() > 5,
        "the book's exit-code table"
    );
    assert_eq!(
        exit_code_rows(&readme),
        exit_code_rows(&book),
        "README.md's exit-code table differs from docs/src/exit-codes.md's"
    );
}

/// A line of an example or of real output, made comparable: the folder before
/// `trace-recipe-out/` dropped, every run of digits one `N` (pids, times,
/// counts of steps), a duration's unit one `s` (a lifetime may print in ms
/// or µs), blanks collapsed.
fn normalize(line: &str) -> String {
    let line = match line.find("trace-recipe-out/") {
        Some(i) => {
            let start = line[..i].rfind(' ').map_or(0, |s| s + 1);
            format!("{}{}", &line[..start], &line[i..])
        }
        None => line.to_string(),
    };
    let mut out = String::new();
    let mut last = ' ';
    for c in line.trim().chars() {
        let c = if c.is_ascii_digit() { 'N' } else { c };
        if (c == 'N' && last == 'N' && out.ends_with('N'))
            || (c.is_whitespace() && last.is_whitespace())
        {
            continue;
        }
        out.push(if c.is_whitespace() { ' ' } else { c });
        last = c;
    }
    ["Nns", "Nµs", "Nms"]
        .iter()
        .fold(out, |o, unit| o.replace(unit, "Ns"))
}

#[test]
fn checked_in_report_schema_is_what_schema_report_prints() {
    let out = trace_recipe(&["schema", "--report"]);
    assert!(out.status.success());
    let checked_in = std::fs::read_to_string(repo().join("schema/report.schema.json")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        checked_in.trim_end(),
        "schema/report.schema.json is stale: run `cargo run -- schema --report > schema/report.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&checked_in).unwrap();
    for key in [
        "format_version",
        "events",
        "lost_total",
        "lost_percent",
        "timeline",
        "latency",
        "stacks",
    ] {
        assert!(
            schema["properties"].get(key).is_some(),
            "report schema lacks `{key}`"
        );
    }
}

#[test]
fn checked_in_manifest_schema_is_what_schema_manifest_prints() {
    let out = trace_recipe(&["schema", "--manifest"]);
    assert!(out.status.success());
    let checked_in =
        std::fs::read_to_string(repo().join("schema/bundle-manifest.schema.json")).unwrap();
    assert_eq!(
        text(&out.stdout).trim_end(),
        checked_in.trim_end(),
        "schema/bundle-manifest.schema.json is stale: run `cargo run -- schema --manifest > schema/bundle-manifest.schema.json`"
    );
}

/// The man pages' EXAMPLES (`trace_recipe::cli::man::EXAMPLES`) are examples
/// of the book: each command line is shown there after `$ ` (or `team-b$ `),
/// whole or followed by more (`; echo "exit $?"`, a comment), so its output
/// can be read in the book.
#[test]
fn man_page_examples_are_the_books() {
    let book: Vec<String> = book_chapters().iter().map(|c| read(c)).collect();
    let shown: Vec<&str> = book
        .iter()
        .flat_map(|b| b.lines())
        .filter_map(|l| l.split_once("$ ").map(|(_, cmd)| cmd))
        .collect();
    for e in trace_recipe::cli::man::EXAMPLES {
        assert!(
            shown.iter().any(|cmd| cmd
                .strip_prefix(e.line)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ';']))),
            "the man page example `{}` ({}) is not a `$ ` line of the book",
            e.line,
            e.command
        );
    }
}

/// `trace-recipe __man DIR` writes every page with an EXIT STATUS section
/// holding each row of the book's exit-code table, and each command's page
/// with its EXAMPLES.
#[test]
fn man_pages_have_the_books_exit_status_and_examples() {
    let dir = tempfile::tempdir().unwrap();
    let out = trace_recipe(&["__man", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let book = read(&repo().join("docs/src/exit-codes.md"));
    let codes: Vec<&str> = exit_code_rows(&book)
        .iter()
        .skip(2)
        .filter_map(|r| r.trim_matches('|').split('|').next())
        .map(str::trim)
        .collect();
    assert!(codes.len() > 5, "{codes:?}");
    let mut pages = 0;
    for page in std::fs::read_dir(dir.path()).unwrap() {
        let page = page.unwrap().path();
        let name = page.file_stem().unwrap().to_str().unwrap().to_string();
        // The page as man prints it, near enough: roff's escapes undone.
        let roff = read(&page)
            .replace("\\-", "-")
            .replace("\\*(Aq", "'")
            .replace("\\\\", "\\");
        assert!(
            roff.contains(".SH \"EXIT STATUS\""),
            "{name}: no EXIT STATUS"
        );
        for code in &codes {
            assert!(
                roff.contains(&format!("\\fB{code}\\fR")),
                "{name}: no exit code {code}"
            );
        }
        let command = name.strip_prefix("trace-recipe-").unwrap_or("");
        for e in trace_recipe::cli::man::EXAMPLES
            .iter()
            .filter(|e| e.command == command)
        {
            assert!(
                roff.contains(e.line),
                "{name}: no example `{}`:\n{roff}",
                e.line
            );
        }
        pages += 1;
    }
    assert!(pages > 10, "only {pages} man pages");
}

/// The tests that drive the host's tracefs: each holds the tracefs lock
/// (`TracefsGuard`), and nextest runs them one at a time (the `tracefs` test
/// group of .config/nextest.toml).
mod tracefs {
    use super::*;

    /// Every recipe points at the schema, has a description and a `# What to look
    /// for` block, and checks clean on this kernel, except recipes that declare what
    /// they need (`# needs: ...`) and on which kernels they are proven (`# kernels:
    /// 6.1, 6.12`, checked in the kernel lab, tests/lab.rs): those may fail here, but
    /// only with problems of this kernel, never of the recipe.
    #[test]
    fn every_recipe_points_at_the_schema_and_checks_clean_on_this_kernel() {
        // `check` of a recipe with a `[tracer]` probes a scratch instance: keep it
        // out of other tests' snapshots.
        let _guard = TracefsGuard::acquire();
        let all = recipes();
        assert!(all.len() >= 5, "recipes/ must hold at least five recipes");
        for r in all {
            let body = std::fs::read_to_string(&r).unwrap();
            assert!(
                body.starts_with("#:schema ../schema/recipe.schema.json\n"),
                "{} must start with the #:schema line",
                r.display()
            );
            assert!(
                body.contains("\ndescription = "),
                "{} needs a description",
                r.display()
            );
            assert!(
                body.contains("# What to look for"),
                "{} needs a `# What to look for` comment block",
                r.display()
            );
            let out = trace_recipe(&["check", r.to_str().unwrap()]);
            let needs = body.lines().any(|l| l.starts_with("# needs: "));
            if needs {
                assert!(
                    body.lines().any(|l| l.starts_with("# kernels: ")),
                    "{} declares `# needs:` but not `# kernels:` (where the lab proves it)",
                    r.display()
                );
            }
            if needs && !out.status.success() {
                let stdout = text(&out.stdout);
                let errors: Vec<&str> =
                    stdout.lines().filter(|l| l.contains(": error (")).collect();
                assert!(
                    !errors.is_empty()
                        && errors.iter().all(|l| l.contains(": error (this kernel):")),
                    "{} may fail here only for what this kernel lacks:\n{stdout}{}",
                    r.display(),
                    text(&out.stderr)
                );
                continue;
            }
            assert!(
                out.status.success(),
                "{} does not check clean:\n{}{}",
                r.display(),
                text(&out.stdout),
                text(&out.stderr)
            );
        }
    }

    /// The `exec-tree` example of the README (and of the book's `run` chapter) is
    /// run again: each line it shows after `$ sudo trace-recipe run
    /// recipes/exec-tree.toml`, `$ trace-recipe report DIR/trace.dat` and
    /// `$ trace-cmd report -i DIR/trace.dat` must be a line of the real output,
    /// numbers aside (`...` marks a cut).
    #[test]
    fn readme_and_book_exec_tree_examples_are_real_output() {
        let _guard = TracefsGuard::acquire();
        let cwd = tempfile::tempdir().unwrap();
        let run = std::process::Command::new(crate::common::bin())
            .args([
                "run",
                repo().join("recipes/exec-tree.toml").to_str().unwrap(),
            ])
            .current_dir(cwd.path())
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}{}",
            text(&run.stdout),
            text(&run.stderr)
        );
        let out_dir = std::fs::read_dir(cwd.path().join("trace-recipe-out"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let trace_dat = out_dir.join("trace.dat");
        let report = trace_recipe(&["report", trace_dat.to_str().unwrap()]);
        assert!(report.status.success(), "{}", text(&report.stderr));
        let real = |command: &str| -> Vec<String> {
            let out = if command == "$ sudo trace-recipe run recipes/exec-tree.toml" {
                format!("{}{}", text(&run.stderr), text(&run.stdout))
            } else if command.starts_with("$ trace-recipe report ") {
                text(&report.stdout)
            } else {
                crate::common::trace_cmd_report(&trace_dat)
            };
            out.lines().map(normalize).collect()
        };
        let mut checked = 0;
        for doc in ["README.md", "docs/src/run.md"] {
            let body = read(&repo().join(doc));
            let block = code_blocks(&body)
                .into_iter()
                .find(|b| b.first() == Some(&"$ sudo trace-recipe run recipes/exec-tree.toml"))
                .unwrap_or_else(|| panic!("{doc} shows a run of recipes/exec-tree.toml"));
            let mut lines = Vec::new();
            let mut command = "";
            for line in block {
                let known = line == "$ sudo trace-recipe run recipes/exec-tree.toml"
                    || (line.starts_with("$ trace-recipe report ") && line.ends_with("/trace.dat"))
                    || (line.starts_with("$ trace-cmd report -i ") && line.ends_with("/trace.dat"));
                if line.starts_with("$ ") {
                    assert!(
                        known,
                        "{doc}: the exec-tree example runs `{line}`, which this test does not know"
                    );
                    command = line;
                    lines = real(command);
                    continue;
                }
                if line.trim() == "..." || line.trim().is_empty() {
                    continue;
                }
                assert!(
                    lines.contains(&normalize(line)),
                    "{doc}: the line `{line}` of `{command}` is not in the real output:\n{}",
                    lines.join("\n")
                );
                checked += 1;
            }
        }
        assert!(checked > 20, "only {checked} example lines checked");
    }
}
