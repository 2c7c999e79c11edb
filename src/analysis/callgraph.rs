//! function_graph call paths for a flame graph (part of `funcgraph`): each
//! task's call stack is rebuilt from `ftrace:funcgraph_entry` (`func`,
//! `depth`) and `ftrace:funcgraph_exit` (`func`, `depth`, `calltime`,
//! `rettime`); a return adds its function's self time (`rettime - calltime`
//! less its callees' time), in trace-clock units, to its call path.
//!
//! Bounded: calls deeper than [`MAX_DEPTH`] and tasks past [`MAX_TASKS`] are
//! not followed (their returns' time is added up as one `[not followed]`
//! frame), and call paths past [`MAX_STACKS`] as one `[other paths]` frame.

use rustc_hash::FxHashMap;
use tracedat::TraceFile;

use super::funcgraph::{Call, Decoder, Entry, Return};
use super::stacks::{Folded, MAX_STACKS};
use super::tasks::TaskSlots;

/// The deepest call followed (the kernel's own limit, FTRACE_RETFUNC_DEPTH, is 50).
const MAX_DEPTH: usize = 128;
/// Tasks whose call stacks are followed at once.
const MAX_TASKS: usize = 16_384;

/// One open call of a task.
#[derive(Clone, Copy)]
struct Frame {
    /// Function address; 0 when its entry was not seen.
    func: u64,
    /// Time of the callees that returned so far.
    callees: u64,
    /// The node of the call's path (its callers' functions and its own) in
    /// [`PathTree`], or [`NO_NODE`].
    node: u32,
    /// The node of the last call it made, or [`NO_NODE`] before its first.
    last: u32,
}

/// Nodes a [`PathTree`] makes at most: past them a return's path is looked
/// up by its functions instead (slower, same result).
const MAX_NODES: usize = 65_536;
/// No node: the tree was full when the path was first met.
const NO_NODE: u32 = u32::MAX;
/// The empty path.
const ROOT: u32 = 0;

/// The call paths met so far as a tree, so that a return finds its path in
/// the node its entry made (one lookup per entry, none per return, instead
/// of hashing the whole path per return).
struct PathTree {
    /// Per node: its parent and its function (the root's are unused).
    nodes: Vec<(u32, u64)>,
    /// (parent, function) → node.
    children: FxHashMap<(u32, u64), u32>,
    /// Per node: the self time of its returns, once its path has a row.
    time: Vec<Option<u64>>,
    /// Per node: the function and node of its first callee last time, and
    /// of the call its caller made after it last time. A task repeating
    /// what it did (a loop of system calls) finds each call's node here by
    /// one comparison instead of a lookup in `children`.
    after: Vec<[(u64, u32); 2]>,
    /// Most nodes ([`MAX_NODES`]).
    limit: usize,
}

impl PathTree {
    fn new() -> PathTree {
        PathTree {
            nodes: vec![(NO_NODE, 0)],
            children: FxHashMap::default(),
            time: vec![None],
            after: vec![[(0, NO_NODE); 2]],
            limit: MAX_NODES,
        }
    }

    /// The node of `parent`'s path followed by `func`; [`NO_NODE`] when
    /// `parent` is none or the tree is full.
    fn child(&mut self, parent: u32, func: u64) -> u32 {
        if parent == NO_NODE {
            return NO_NODE;
        }
        if let Some(n) = self.children.get(&(parent, func)) {
            return *n;
        }
        if self.nodes.len() >= self.limit {
            return NO_NODE;
        }
        let n = self.nodes.len() as u32;
        self.nodes.push((parent, func));
        self.time.push(None);
        self.after.push([(0, NO_NODE); 2]);
        self.children.insert((parent, func), n);
        n
    }

    /// [`PathTree::child`] of `parent`'s path followed by `func`, where
    /// `prev` is the node of the call `parent` made before ([`NO_NODE`] for
    /// its first): first asked of what followed `prev` (or began `parent`)
    /// last time. A node's caller is fixed, so the node remembered there
    /// was made for the same `parent`.
    #[inline]
    fn next_child(&mut self, parent: u32, prev: u32, func: u64) -> u32 {
        let (at, which) = match prev {
            NO_NODE => (parent, 0),
            prev => (prev, 1),
        };
        let Some(after) = self.after.get_mut(at as usize) else {
            return self.child(parent, func);
        };
        match after[which] {
            (f, n) if f == func && n != NO_NODE => n,
            _ => {
                let n = self.child(parent, func);
                if let Some(after) = self.after.get_mut(at as usize) {
                    after[which] = (func, n);
                }
                n
            }
        }
    }

    /// The functions of node `n`'s path, outermost first.
    fn path(&self, mut n: u32) -> Vec<u64> {
        let mut path = Vec::new();
        while n != ROOT {
            let Some(&(parent, func)) = self.nodes.get(n as usize) else {
                break;
            };
            path.push(func);
            n = parent;
        }
        path.reverse();
        path
    }
}

/// Cuts or pads `stack` to `depth` calls: padding calls are unknown (their
/// entries were not seen, function 0).
fn set_depth(stack: &mut Vec<Frame>, depth: usize, tree: &mut PathTree) {
    stack.truncate(depth);
    while stack.len() < depth {
        let parent = stack.last().map_or(ROOT, |f| f.node);
        stack.push(Frame {
            func: 0,
            callees: 0,
            node: tree.child(parent, 0),
            last: NO_NODE,
        });
    }
}

/// Rebuilds call paths over one pass.
pub(super) struct CallPaths {
    /// Per pid slot, the open calls.
    tasks: TaskSlots<Vec<Frame>>,
    tree: PathTree,
    /// Paths with a row: nodes with a time, and the paths of `overflow`.
    rows: usize,
    /// Self time of the paths met after the tree was full, by their functions.
    overflow: FxHashMap<Vec<u64>, u64>,
    /// Time of the paths past [`MAX_STACKS`].
    other: u64,
    /// Time of the returns not followed (depth or task limits).
    skipped: u64,
}

impl CallPaths {
    /// `None` unless the file has both funcgraph formats with their fields.
    pub(super) fn new(calls: &Decoder) -> Option<CallPaths> {
        (calls.has_entry() && calls.has_exit()).then(|| CallPaths {
            tasks: TaskSlots::new(MAX_TASKS),
            tree: PathTree::new(),
            rows: 0,
            overflow: FxHashMap::default(),
            other: 0,
            skipped: 0,
        })
    }

    /// The same with a tree of at most `nodes` nodes (the root included),
    /// so that a test meets the paths past a full tree.
    #[cfg(test)]
    pub(super) fn with_node_limit(mut self, nodes: usize) -> CallPaths {
        self.tree.limit = nodes;
        self
    }

    /// One call of the task in pid slot `task`.
    pub(super) fn add(&mut self, call: &Call, task: usize) {
        match *call {
            Call::Entry(Entry { func, depth }) => {
                let d = depth as usize;
                if d >= MAX_DEPTH {
                    return;
                }
                let Some(stack) = self.tasks.get(task) else {
                    return;
                };
                set_depth(stack, d, &mut self.tree);
                let node = match stack.last_mut() {
                    Some(parent) => {
                        let node = self.tree.next_child(parent.node, parent.last, func);
                        parent.last = node;
                        node
                    }
                    None => self.tree.child(ROOT, func),
                };
                stack.push(Frame {
                    func,
                    callees: 0,
                    node,
                    last: NO_NODE,
                });
            }
            Call::Return(Return { func, depth, time }) => {
                let d = depth as usize;
                let stack = if d < MAX_DEPTH {
                    self.tasks.get(task)
                } else {
                    None
                };
                let Some(stack) = stack else {
                    self.skipped = self.skipped.saturating_add(time);
                    return;
                };
                // The callees' time counts only when this return closes the call
                // whose entry was seen; otherwise the entry was lost.
                let opened = match stack.get(d) {
                    Some(f) if f.func == func => Some((f.callees, f.node)),
                    _ => None,
                };
                set_depth(stack, d, &mut self.tree);
                let (callees, node) = opened.unwrap_or_else(|| {
                    let parent = stack.last().map_or(ROOT, |f| f.node);
                    (0, self.tree.child(parent, func))
                });
                if let Some(parent) = stack.last_mut() {
                    parent.callees = parent.callees.saturating_add(time);
                }
                let own = time.saturating_sub(callees);
                let counted = match self.tree.time.get_mut(node as usize) {
                    Some(Some(n)) => Some(n),
                    Some(n) if self.rows < MAX_STACKS => {
                        self.rows += 1;
                        Some(n.insert(0))
                    }
                    Some(_) => None,
                    None => {
                        let path: Vec<u64> = stack.iter().map(|f| f.func).chain([func]).collect();
                        let new = !self.overflow.contains_key(&path);
                        if new && self.rows >= MAX_STACKS {
                            None
                        } else {
                            self.rows += usize::from(new);
                            Some(self.overflow.entry(path).or_default())
                        }
                    }
                };
                match counted {
                    Some(n) => *n = n.saturating_add(own),
                    None => self.other = self.other.saturating_add(own),
                }
            }
        }
    }

    /// The call paths folded, functions symbolized through `file`'s kallsyms
    /// (`[unknown]` where an entry was not seen).
    pub(super) fn finish(self, file: &TraceFile) -> Folded {
        let mut folded = Folded::default();
        // Only the nodes with a time are rows; each function is named once.
        let nodes = (self.tree.time.iter().enumerate())
            .filter_map(|(node, n)| Some((n.as_ref()?, node)))
            .map(|(n, node)| (self.tree.path(node as u32), *n));
        let mut names: FxHashMap<u64, String> = FxHashMap::default();
        for (path, n) in nodes.chain(self.overflow) {
            for a in &path {
                names
                    .entry(*a)
                    .or_insert_with(|| match (*a, file.symbol(*a)) {
                        (0, _) => "[unknown]".to_string(),
                        (_, Some((name, _))) => name.to_string(),
                        (a, None) => format!("0x{a:x}"),
                    });
            }
            folded.add(
                path.iter().map(|a| names.get(a).map_or("", String::as_str)),
                n,
            );
        }
        if self.other > 0 {
            folded.add(["[other paths]"], self.other);
        }
        if self.skipped > 0 {
            folded.add(["[not followed]"], self.skipped);
        }
        folded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls made in a varying order (each caller calls one of three
    /// functions next, chosen by a fixed pseudo-random sequence): every
    /// node the next-call cache gives is the node the tree's map gives.
    #[test]
    fn the_next_call_cache_gives_the_nodes_of_the_map() {
        let mut tree = PathTree::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // A stack of (node, its last callee's node), root first.
        let mut stack = vec![(ROOT, NO_NODE)];
        let mut hits = 0;
        for _ in 0..10_000 {
            let r = next();
            if r % 3 == 0 && stack.len() > 1 {
                stack.pop();
                continue;
            }
            let func = 0x1000 + r % 3;
            let (parent, prev) = *stack.last().unwrap();
            let (at, which) = match prev {
                NO_NODE => (parent, 0),
                p => (p, 1),
            };
            let hit = tree.after[at as usize][which].0 == func;
            let node = tree.next_child(parent, prev, func);
            hits += usize::from(hit);
            assert_eq!(
                node,
                tree.child(parent, func),
                "{func:x} under node {parent}"
            );
            stack.last_mut().unwrap().1 = node;
            if stack.len() < 6 {
                stack.push((node, NO_NODE));
            }
        }
        // Both ways were taken: the cache's answer, and the map's.
        assert!((1_000..6_000).contains(&hits), "{hits} of 10000");
    }
}
