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
use tracedat::{Event, Field, IntField, TraceFile};

use super::latency::uint;
use super::stacks::{Folded, MAX_STACKS};

/// The deepest call followed (the kernel's own limit, FTRACE_RETFUNC_DEPTH, is 50).
const MAX_DEPTH: usize = 128;
/// Tasks whose call stacks are followed at once.
const MAX_TASKS: usize = 16_384;

/// What a format id is to the call paths.
#[derive(Clone)]
enum Role {
    None,
    Entry {
        func: IntField,
        depth: IntField,
    },
    Exit {
        func: IntField,
        depth: IntField,
        calltime: IntField,
        rettime: IntField,
    },
}

/// One open call of a task.
#[derive(Clone, Copy, Default)]
struct Frame {
    /// Function address; 0 when its entry was not seen.
    func: u64,
    /// Time of the callees that returned so far.
    callees: u64,
}

/// Rebuilds call paths over one pass.
pub(super) struct CallPaths {
    roles: Vec<Role>,
    tasks: FxHashMap<i32, Vec<Frame>>,
    paths: FxHashMap<Vec<u64>, u64>,
    /// The path of the return being counted, reused from one return to the
    /// next (a map lookup by slice allocates only for a new path).
    path: Vec<u64>,
    /// Time of the paths past [`MAX_STACKS`].
    other: u64,
    /// Time of the returns not followed (depth or task limits).
    skipped: u64,
}

impl CallPaths {
    /// `None` unless `file` has both funcgraph formats with their fields.
    pub(super) fn new(file: &TraceFile) -> Option<CallPaths> {
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        let (mut entry, mut exit) = (false, false);
        for f in file.formats().filter(|f| f.system == "ftrace") {
            let field = |n: &str| f.field(n).map(Field::int);
            let role = match f.name.as_str() {
                "funcgraph_entry" => match (field("func"), field("depth")) {
                    (Some(func), Some(depth)) => {
                        entry = true;
                        Role::Entry { func, depth }
                    }
                    _ => Role::None,
                },
                "funcgraph_exit" => match (
                    field("func"),
                    field("depth"),
                    field("calltime"),
                    field("rettime"),
                ) {
                    (Some(func), Some(depth), Some(calltime), Some(rettime)) => {
                        exit = true;
                        Role::Exit {
                            func,
                            depth,
                            calltime,
                            rettime,
                        }
                    }
                    _ => Role::None,
                },
                _ => Role::None,
            };
            roles[f.id as usize] = role;
        }
        (entry && exit).then(|| CallPaths {
            roles,
            tasks: FxHashMap::default(),
            paths: FxHashMap::default(),
            path: Vec::new(),
            other: 0,
            skipped: 0,
        })
    }

    /// Whether records of format `id` mean something to this analysis
    /// (the others need not be fed to it).
    pub(super) fn handles(&self, id: u16) -> bool {
        !matches!(self.roles.get(usize::from(id)), None | Some(Role::None))
    }

    /// One record of task `pid`.
    pub(super) fn add(&mut self, ev: &Event<'_>, pid: i32) {
        let id = ev.type_id() as usize;
        let Some(role) = self.roles.get(id).filter(|_| ev.format.id as usize == id) else {
            return;
        };
        match role {
            Role::None => {}
            Role::Entry { func, depth } => {
                let (Some(func), Some(d)) = (uint(func, ev), uint(depth, ev)) else {
                    return;
                };
                let d = d as usize;
                if d >= MAX_DEPTH
                    || (self.tasks.len() >= MAX_TASKS && !self.tasks.contains_key(&pid))
                {
                    return;
                }
                let stack = self.tasks.entry(pid).or_default();
                stack.resize(d, Frame::default());
                stack.push(Frame { func, callees: 0 });
            }
            Role::Exit {
                func,
                depth,
                calltime,
                rettime,
            } => {
                let (Some(func), Some(d), Some(a), Some(b)) = (
                    uint(func, ev),
                    uint(depth, ev),
                    uint(calltime, ev),
                    uint(rettime, ev),
                ) else {
                    return;
                };
                let (d, time) = (d as usize, b.saturating_sub(a));
                if d >= MAX_DEPTH
                    || (self.tasks.len() >= MAX_TASKS && !self.tasks.contains_key(&pid))
                {
                    self.skipped = self.skipped.saturating_add(time);
                    return;
                }
                let stack = self.tasks.entry(pid).or_default();
                // The callees' time counts only when this return closes the call
                // whose entry was seen; otherwise the entry was lost.
                let callees = match stack.get(d) {
                    Some(f) if f.func == func => f.callees,
                    _ => 0,
                };
                stack.resize(d, Frame::default());
                let path = &mut self.path;
                path.clear();
                path.extend(stack.iter().map(|f| f.func));
                path.push(func);
                if let Some(parent) = stack.last_mut() {
                    parent.callees = parent.callees.saturating_add(time);
                }
                let own = time.saturating_sub(callees);
                if let Some(n) = self.paths.get_mut(path.as_slice()) {
                    *n = n.saturating_add(own);
                } else if self.paths.len() < MAX_STACKS {
                    self.paths.insert(path.clone(), own);
                } else {
                    self.other = self.other.saturating_add(own);
                }
            }
        }
    }

    /// The call paths folded, functions symbolized through `file`'s kallsyms
    /// (`[unknown]` where an entry was not seen).
    pub(super) fn finish(self, file: &TraceFile) -> Folded {
        let mut folded = Folded::default();
        for (path, n) in &self.paths {
            let names: Vec<String> = path
                .iter()
                .map(|a| match (*a, file.symbol(*a)) {
                    (0, _) => "[unknown]".to_string(),
                    (_, Some((name, _))) => name.to_string(),
                    (a, None) => format!("0x{a:x}"),
                })
                .collect();
            folded.add(names.iter().map(String::as_str), *n);
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
