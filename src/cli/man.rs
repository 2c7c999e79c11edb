//! The man pages (`trace-recipe __man DIR`, clap_mangen): one page per visible
//! command plus `trace-recipe(1)`, each with the sections clap_mangen makes
//! from the clap types and two more from the same source as the book:
//! EXIT STATUS, the exit-code table of `docs/src/exit-codes.md` and the notes
//! under it (compiled in), and EXAMPLES, the command lines of [`EXAMPLES`],
//! each one a `$ ` line of the book (`tests/docs.rs` checks both).

use roff::{Roff, bold, roman};

/// The book's chapter on exit codes; its `| code | meaning |` table and the
/// notes under it are the EXIT STATUS section of every page.
const EXIT_CODES_CHAPTER: &str = include_str!("../../docs/src/exit-codes.md");

/// An example of a man page's EXAMPLES section.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// The command whose page shows it (`check`), or `""` for `trace-recipe(1)`.
    pub command: &'static str,
    /// The command line, as the book shows it after `$ `.
    pub line: &'static str,
    /// What it does, one sentence.
    pub what: &'static str,
}

/// Every page's examples. Each `line` is an example of the book (a line
/// `$ LINE...` there), so its output can be read in the book.
pub const EXAMPLES: &[Example] = &[
    Example {
        command: "check",
        line: "trace-recipe check bad.toml",
        what: "Validate a recipe against the running kernel: every problem at once, each at FILE:LINE:COL.",
    },
    Example {
        command: "check",
        line: "trace-recipe check recipes/openat-failures.toml --set errno=-13 --plan",
        what: "Set a parameter and print every tracefs write the run would make, with its undo.",
    },
    Example {
        command: "check",
        line: "trace-recipe check --explain team/openat.toml",
        what: "Print every effective key with the file and line that set it (extends, params).",
    },
    Example {
        command: "check",
        line: "trace-recipe check --facts tests/facts/debian-6.12.json.zst kprobe-fetch.toml",
        what: "Validate against another kernel's facts (trace-recipe facts), without root or tracefs.",
    },
    Example {
        command: "check",
        line: "trace-recipe check --against sleepy-a.tar.zst",
        what: "Validate a bundle's recipe here and list the kernel facts that differ and matter.",
    },
    Example {
        command: "check",
        line: "trace-recipe check --plan --export trace-cmd recipes/stop-on-exit.toml",
        what: "Print the nearest trace-cmd record command line for the recipe.",
    },
    Example {
        command: "facts",
        line: "sudo trace-recipe facts -o here.json.zst",
        what: "Save this kernel's ftrace facts, for check --facts elsewhere.",
    },
    Example {
        command: "run",
        line: "sudo trace-recipe run recipes/exec-tree.toml",
        what: "Run a recipe with its own workload; the output folder is printed at the end.",
    },
    Example {
        command: "run",
        line: "sudo trace-recipe run expect.toml --junit expect.xml -- sh -c 'ls /; cat /etc/hostname; date'",
        what: "Trace another command, and write the recipe's expectations as JUnit XML.",
    },
    Example {
        command: "run",
        line: "sudo trace-recipe run exec-tree --format json -q -o /tmp/rb-exec-tree",
        what: "Run a recipe found by name on the recipe path; one JSON object on stdout.",
    },
    Example {
        command: "rerun",
        line: "trace-recipe rerun sleepy-a.tar.zst --allow-commands -o same --bundle",
        what: "Run a bundle's recipe again here, agreeing to the commands it starts.",
    },
    Example {
        command: "report",
        line: "trace-recipe report trace.dat | head -3",
        what: "Print a trace.dat one event a line, as trace-cmd report does.",
    },
    Example {
        command: "export",
        line: "trace-recipe export trace.dat --format parquet -o out",
        what: "Write a trace.dat as Parquet tables, one per event, for DuckDB, polars or pandas.",
    },
    Example {
        command: "diff",
        line: "trace-recipe diff sleepy-a.tar.zst slow.tar.zst --fail-if 'p99(syscalls:clock_nanosleep) > +500%'",
        what: "Compare two runs; exit 6 when the p99 latency grew by more than 500 %.",
    },
    Example {
        command: "fleet",
        line: "trace-recipe fleet fleet/latest/h1.tar.zst fleet/latest/h2.tar.zst fleet/latest/h3.tar.zst",
        what: "Summarise one recipe's runs on three hosts.",
    },
    Example {
        command: "completions",
        line: "trace-recipe completions bash > ~/.local/share/bash-completion/completions/trace-recipe",
        what: "Install the bash completion for this user.",
    },
    Example {
        command: "pack",
        line: "trace-recipe pack trace-recipe-out/exec-expect-20261123-065606",
        what: "Pack a run's output folder into one bundle, FOLDER.tar.zst.",
    },
    Example {
        command: "unpack",
        line: "trace-recipe unpack exec-expect-20261123-065606.tar.zst -o un",
        what: "Check a bundle and unpack it into the folder un.",
    },
    Example {
        command: "collect-boot",
        line: "sudo trace-recipe collect-boot -o last-boot",
        what: "After a reboot or crash, read the armed flight recorder's last boot into the run folder last-boot and release it.",
    },
    Example {
        command: "status",
        line: "trace-recipe status",
        what: "Show what differs from a clean boot and what runs left behind.",
    },
    Example {
        command: "reset",
        line: "trace-recipe reset --dry-run",
        what: "Say what reset would remove, changing nothing.",
    },
    Example {
        command: "reset",
        line: "trace-recipe reset",
        what: "Remove what dead trace-recipe runs left behind.",
    },
    Example {
        command: "schema",
        line: "trace-recipe schema --of status | head -5",
        what: "Print the JSON Schema of status --format json.",
    },
    Example {
        command: "list",
        line: "trace-recipe list",
        what: "List the recipes on the recipe path and whether each passes check here.",
    },
    Example {
        command: "show",
        line: "trace-recipe show exec-tree | head -4",
        what: "Print a recipe by name, with its What to look for comments.",
    },
    Example {
        command: "events",
        line: "trace-recipe events 'sched_process_e*' --fields",
        what: "List matching events with their fields and C types.",
    },
    Example {
        command: "functions",
        line: "trace-recipe functions 'vfs_rea*'",
        what: "List matching kernel functions (or kprobe targets where the function tracer is refused).",
    },
    Example {
        command: "",
        line: "trace-recipe check bad.toml",
        what: "Validate a recipe against the running kernel: every problem at once.",
    },
    Example {
        command: "",
        line: "sudo trace-recipe run recipes/exec-tree.toml",
        what: "Run a recipe: apply, record, roll back, write trace.dat and reports.",
    },
    Example {
        command: "",
        line: "trace-recipe report trace.dat | head -3",
        what: "Read a trace.dat.",
    },
];

/// The book's exit-code chapter as man text: the rows of its
/// `| code | meaning |` table as `(code, meaning)`, and the paragraphs between
/// the table and the next heading (what a code means to a single command).
/// Markdown is reduced to plain text by [`plain`].
fn exit_status(chapter: &str) -> (Vec<(&str, String)>, Vec<String>) {
    let mut lines = chapter
        .lines()
        .skip_while(|l| l.trim() != "| code | meaning |")
        .skip(2)
        .peekable();
    let mut rows = Vec::new();
    while let Some(l) = lines.next_if(|l| l.starts_with('|')) {
        if let Some((code, meaning)) = l.trim().trim_matches('|').split_once('|') {
            rows.push((code.trim(), plain(meaning.trim())));
        }
    }
    let notes = lines
        .take_while(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .split(|l| l.trim().is_empty())
        .filter(|p| !p.is_empty())
        .map(|p| plain(&p.join(" ")))
        .collect();
    (rows, notes)
}

/// `md` as plain text: each link `[text](target)` becomes its text, and code
/// spans lose their backticks. Brackets that open no link (`[[expect]]`) stay.
fn plain(md: &str) -> String {
    let mut out = String::new();
    let mut rest = md;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let link = after.find(']').and_then(|close| {
            let target = after[close..].strip_prefix("](")?;
            let end = target.find(')')?;
            Some((&after[..close], &target[end + 1..]))
        });
        match link {
            Some((text, tail)) if !text.contains('[') => {
                out.push_str(text);
                rest = tail;
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.replace('`', "")
}

/// The EXIT STATUS and EXAMPLES sections of the page of `command` (`""` for
/// `trace-recipe(1)`), as roff without its preamble (the page has one).
fn sections(command: &str) -> String {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    let (rows, notes) = exit_status(EXIT_CODES_CHAPTER);
    for (code, meaning) in rows {
        roff.control("TP", []);
        roff.text([bold(code)]);
        roff.text([roman(meaning)]);
    }
    for note in notes {
        roff.control("PP", []);
        roff.text([roman(note)]);
    }
    let mut examples = EXAMPLES.iter().filter(|e| e.command == command).peekable();
    if examples.peek().is_some() {
        roff.control("SH", ["EXAMPLES"]);
        // What it does, then the command line as typed: indented, unfilled.
        for e in examples {
            roff.control("PP", []);
            roff.text([roman(e.what)]);
            roff.control("RS", ["4"]);
            roff.control("nf", []);
            roff.text([roman("$ "), bold(e.line)]);
            roff.control("fi", []);
            roff.control("RE", []);
        }
    }
    // `render` writes apostrophes as `\*(Aq`, a string its preamble defines;
    // the page these sections go into starts with that preamble already.
    let preamble = Roff::new().render();
    let text = roff.render();
    text.strip_prefix(&preamble).unwrap_or(&text).to_string()
}

/// clap_mangen's page of `cmd`, the page of `command` (`""` for
/// `trace-recipe(1)`), with [`sections`] placed before its VERSION and AUTHORS
/// sections (or at its end), as man-pages(7) orders them.
pub(super) fn page(cmd: clap::Command, command: &str) -> std::io::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    let page = String::from_utf8(page).map_err(std::io::Error::other)?;
    // A text line never starts with `.SH` (roff escapes a leading period), so
    // these are clap_mangen's own section headings.
    let at = ["\n.SH VERSION", "\n.SH AUTHORS"]
        .iter()
        .filter_map(|s| page.find(s).map(|i| i + 1))
        .min()
        .unwrap_or(page.len());
    let mut out = page[..at].to_string();
    out.push_str(&sections(command));
    out.push_str(&page[at..]);
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::exit;

    #[test]
    fn exit_status_is_the_books_table_of_the_exit_codes() {
        let (rows, notes) = exit_status(EXIT_CODES_CHAPTER);
        let codes: Vec<&str> = rows.iter().map(|(code, _)| *code).collect();
        let ours = [
            exit::OK,
            exit::INVALID,
            exit::USAGE,
            exit::FAILED,
            exit::LOST_LIMIT,
            exit::EXPECTATION_FAILED,
            exit::DIFF_RULE_HELD,
            exit::ROLLBACK_INCOMPLETE,
        ]
        .map(|c| c.to_string());
        assert_eq!(codes[..ours.len()], ours.each_ref().map(String::as_str));
        assert_eq!(codes[ours.len()..], [format!("{}+N", exit::SIGNAL_BASE)]);
        assert!(
            rows[5].1.contains("an [[expect]] of the recipe failed"),
            "{rows:?}"
        );
        assert!(!notes.is_empty());
        for text in rows.iter().map(|(_, m)| m).chain(&notes) {
            assert!(!text.contains('`') && !text.contains("]("), "{text}");
        }
    }

    #[test]
    fn plain_keeps_link_texts_and_drops_backticks() {
        assert_eq!(
            plain("`check` exits 1 ([check](check.md), [Bundles](b.md#x)); `[[expect]]` [x] [y]("),
            "check exits 1 (check, Bundles); [[expect]] [x] [y]("
        );
    }

    #[test]
    fn every_example_is_a_command_line_of_its_page() {
        let cli = <crate::cli::args::Cli as clap::CommandFactory>::command();
        for e in EXAMPLES {
            let line = e.line.strip_prefix("sudo ").unwrap_or(e.line);
            if e.command.is_empty() {
                assert!(line.starts_with("trace-recipe "), "{e:?}");
                continue;
            }
            assert!(
                cli.get_subcommands()
                    .any(|s| !s.is_hide_set() && s.get_name() == e.command),
                "{e:?}: no such command"
            );
            assert!(
                line.starts_with(&format!("trace-recipe {} ", e.command))
                    || line == format!("trace-recipe {}", e.command),
                "{e:?}"
            );
        }
    }

    #[test]
    fn sections_go_before_version_in_a_page_with_one_preamble() {
        let cli = <crate::cli::args::Cli as clap::CommandFactory>::command();
        let page = String::from_utf8(page(cli, "").unwrap()).unwrap();
        let status = page.find("\n.SH \"EXIT STATUS\"\n").unwrap();
        let examples = page.find("\n.SH EXAMPLES\n").unwrap();
        let version = page.find("\n.SH VERSION\n").unwrap();
        assert!(status < examples && examples < version, "{page}");
        assert_eq!(page.matches(".ds Aq").count(), 2, "{page}");
        assert!(
            page.contains("\\fBtrace\\-recipe check bad.toml\\fR"),
            "{page}"
        );
    }
}
