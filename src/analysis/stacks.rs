//! `stacks`: the kernel stacks (`ftrace:kernel_stack`, taken by a
//! `stacktrace` trigger or option) and user stacks (`ftrace:user_stack`, the
//! `userstacktrace` option) of a trace, counted per stack and per the event
//! that took it, and the same as folded stacks ([`Folded`]) for flame graphs.
//!
//! Memory is bounded: the first [`MAX_STACKS`] distinct (event, stack) pairs
//! are told apart; a record whose stack is new after that is counted under
//! its event as one `[other stacks]` frame (`over_limit` in report.json).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracedat::TraceFile;

use super::pass::{At, Finish, Pass};
use super::{Analysis, AnalysisName, Selection, TOP};

/// How many distinct (event, stack) pairs, and function_graph call paths, an
/// analysis tells apart; more are counted together (see the module doc).
pub(crate) const MAX_STACKS: usize = 4096;

/// The most frequent kernel stacks.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Stacks {
    /// kernel_stack (and user_stack) records seen.
    pub(crate) total: u64,
    /// Distinct (event, stack) pairs told apart (at most 4096).
    pub(crate) distinct: u64,
    /// Records whose stack was new after 4096 distinct ones: counted in
    /// `total` and in the folded stacks as `[other stacks]`, not told apart.
    #[serde(default)]
    pub(crate) over_limit: u64,
    /// The most frequent, most first (at most [`TOP`]).
    pub(crate) top: Vec<StackCount>,
    /// Every distinct stack, folded (not in report.json: `stacks.folded`).
    #[serde(skip)]
    pub(crate) folded: Folded,
}

/// One kernel stack and how often it was recorded.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct StackCount {
    /// Times recorded.
    pub(crate) count: u64,
    /// `system:event` of the record the stack followed on its CPU (the event
    /// whose stacktrace trigger or option took it); `""` if none.
    pub(crate) event: String,
    /// A user-space stack (`ftrace:user_stack`: addresses, no symbols).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) user: bool,
    /// Frames, innermost first: `symbol+0xoff` through kallsyms, else the address in hex.
    pub(crate) frames: Vec<String>,
}

/// Folded stacks, the input of flamegraph.pl, inferno and speedscope: one
/// line per distinct path, `root;caller;...;callee WEIGHT`, outermost frame
/// first, sorted. Frames never hold `;`, white space or control characters
/// (each is written `_`), so a line always splits back into the same frames.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Folded {
    /// Path → weight (records, ns or bytes, as the producer says).
    pub(crate) lines: BTreeMap<String, u64>,
}

impl Folded {
    /// Adds `weight` to the path of `frames` (outermost first).
    pub(crate) fn add<'a>(&mut self, frames: impl IntoIterator<Item = &'a str>, weight: u64) {
        let mut path = String::new();
        for (i, f) in frames.into_iter().enumerate() {
            if i > 0 {
                path.push(';');
            }
            path.extend(f.chars().map(|c| match c {
                ';' => '_',
                c if c.is_whitespace() || c.is_control() => '_',
                c => c,
            }));
        }
        if !path.is_empty() {
            let n = self.lines.entry(path).or_default();
            *n = n.saturating_add(weight);
        }
    }

    /// No path.
    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The lines, each ending in `\n`.
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        for (path, n) in &self.lines {
            s.push_str(path);
            s.push(' ');
            s.push_str(&n.to_string());
            s.push('\n');
        }
        s
    }
}

/// A stack as the pass tells it apart: the index of the event that took it,
/// whether it is a user stack, its addresses innermost first.
type StackKey = (usize, bool, Vec<u64>);

/// Counts the stacks of one pass.
#[derive(Default)]
pub(super) struct Collector {
    /// Stack → records.
    kept: FxHashMap<StackKey, u64>,
    /// (event index, user stack) → records past [`MAX_STACKS`].
    over: BTreeMap<(usize, bool), u64>,
    total: u64,
}

impl Collector {
    /// One stack record whose addresses start at byte `at` of `data`, taken
    /// after event `event` (an index into the pass's event names).
    pub(super) fn add(
        &mut self,
        event: usize,
        user: bool,
        data: &[u8],
        at: usize,
        (long, big): (usize, bool),
    ) {
        self.total += 1;
        let frames = stack_frames(data, at, long, big);
        let key = (event, user, frames);
        if let Some(n) = self.kept.get_mut(&key) {
            *n += 1;
        } else if self.kept.len() < MAX_STACKS {
            self.kept.insert(key, 1);
        } else {
            *self.over.entry((event, user)).or_default() += 1;
        }
    }

    /// The report: the [`TOP`] stacks and every stack folded, frames
    /// symbolized through `file`'s kallsyms (offsets dropped in the folded
    /// ones, so a function is one frame however it was left).
    pub(super) fn finish(self, file: &TraceFile, event_names: &[String]) -> Stacks {
        let root = |ev: usize, user: bool| {
            let name = match event_names.get(ev).map(String::as_str) {
                None | Some("") => "[no event]",
                Some(n) => n,
            };
            match user {
                true => format!("{name} [user]"),
                false => name.to_string(),
            }
        };
        let mut folded = Folded::default();
        for ((ev, user, frames), n) in &self.kept {
            let names: Vec<String> = frames
                .iter()
                .rev()
                .map(|a| match (user, file.symbol(*a)) {
                    (false, Some((name, _))) => name.to_string(),
                    _ => format!("0x{a:x}"),
                })
                .collect();
            let root = root(*ev, *user);
            folded.add(
                std::iter::once(root.as_str()).chain(names.iter().map(String::as_str)),
                *n,
            );
        }
        let mut over_limit = 0;
        for ((ev, user), n) in &self.over {
            over_limit += n;
            folded.add([root(*ev, *user).as_str(), "[other stacks]"], *n);
        }
        let distinct = self.kept.len() as u64;
        let mut v: Vec<(StackKey, u64)> = self.kept.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Stacks {
            total: self.total,
            distinct,
            over_limit,
            top: v
                .into_iter()
                .take(TOP)
                .map(|((ev, user, frames), count)| StackCount {
                    count,
                    event: event_names.get(ev).cloned().unwrap_or_default(),
                    user,
                    frames: frames
                        .iter()
                        .map(|a| match user {
                            true => format!("0x{a:x}"),
                            false => super::symbolize(file, *a),
                        })
                        .collect(),
                })
                .collect(),
            folded,
        }
    }
}

/// The `stacks` analysis: each `kernel_stack`/`user_stack` record counted
/// with the event its CPU recorded last (the one that took it), so it sees
/// every record.
pub(super) struct StackPass {
    stacks: Collector,
    /// Per format id: for a stack format, where `caller` starts and whether
    /// it is a user stack.
    stack_at: Vec<Option<(usize, bool)>>,
    /// Per CPU slot: the event index of its last record that was no stack.
    last_on_cpu: Vec<usize>,
    /// The file's long size (4 or 8) and byte order.
    word: (usize, bool),
}

impl Pass for StackPass {
    fn start(file: &TraceFile, sel: &Selection) -> Option<StackPass> {
        if !sel.has(AnalysisName::Stacks) {
            return None;
        }
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut stack_at = vec![None; max_id + 1];
        for f in file.formats() {
            if f.system == "ftrace" && (f.name == "kernel_stack" || f.name == "user_stack") {
                stack_at[f.id as usize] = f
                    .field("caller")
                    .map(|c| (c.offset, f.name == "user_stack"));
            }
        }
        Some(StackPass {
            stacks: Collector::default(),
            stack_at,
            last_on_cpu: Vec::new(),
            word: (usize::from(file.long_size()).clamp(4, 8), file.big_endian()),
        })
    }

    fn handles(&self, _id: u16) -> bool {
        true
    }

    fn sees_unknown(&self) -> bool {
        true
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        if at.cpu >= self.last_on_cpu.len() {
            self.last_on_cpu.resize(at.cpu + 1, 0);
        }
        let stack = match at.counted {
            0 => None,
            _ => self
                .stack_at
                .get(usize::from(at.ev.format.id))
                .copied()
                .flatten(),
        };
        match stack {
            Some((from, user)) => {
                let event = self.last_on_cpu[at.cpu];
                self.stacks.add(event, user, &at.ev.data, from, self.word);
            }
            None => self.last_on_cpu[at.cpu] = at.counted,
        }
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        let s = self.stacks.finish(cx.file, cx.event_names);
        let has = s.total > 0;
        let kept = cx.keeps(has);
        out.section(AnalysisName::Stacks, kept, has);
        out.stacks = kept.then_some(s);
    }
}

fn read_word(b: &[u8], big: bool) -> u64 {
    let mut a = [0u8; 8];
    if big {
        a[8 - b.len()..].copy_from_slice(b);
        u64::from_be_bytes(a)
    } else {
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a)
    }
}

/// The addresses of a kernel_stack record: words from `at` to the end of the
/// record, up to the first all-ones word, zeros skipped.
pub(super) fn stack_frames(data: &[u8], at: usize, long: usize, big: bool) -> Vec<u64> {
    let end_marker = if long == 8 {
        u64::MAX
    } else {
        u64::from(u32::MAX)
    };
    data.get(at..)
        .unwrap_or(&[])
        .chunks_exact(long)
        .map(|c| read_word(c, big))
        .take_while(|a| *a != end_marker)
        .filter(|a| *a != 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_frames_cannot_break_the_line_format() {
        let mut f = Folded::default();
        f.add(["ev", "a;b", "c d\ne"], 2);
        f.add(["ev", "a;b", "c d\ne"], 3);
        f.add(std::iter::empty(), 9);
        assert_eq!(f.text(), "ev;a_b;c_d_e 5\n");
    }

    #[test]
    fn stacks_past_the_limit_are_counted_not_told_apart() {
        let mut c = Collector::default();
        for i in 0..MAX_STACKS as u64 + 10 {
            c.add(1, false, &(i + 1).to_le_bytes(), 0, (8, false));
        }
        c.add(1, false, &1u64.to_le_bytes(), 0, (8, false));
        assert_eq!(c.kept.len(), MAX_STACKS);
        assert_eq!(c.over.get(&(1, false)), Some(&10));
        assert_eq!(c.total, MAX_STACKS as u64 + 11);
    }
}
