//! The `block` analysis: block I/O latency from `block:block_rq_issue` to
//! `block:block_rq_complete`, paired by device and start sector (the request's
//! identity while it is in flight), per device and per request size.
//!
//! The device is `dev` as the kernel stores it (`MAJOR << 20 | MINOR`), shown
//! `MAJ:MIN`; the size is the issue's `nr_sector` × 512 bytes. At most
//! [`MAX_KEYS`](super::errno::MAX_KEYS) requests are in flight at once (later
//! issues count in `untracked`), and as many devices and sizes. Per event, the
//! pass reads three fields and updates hash maps keyed by numbers.

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracedat::{Event, IntField, TraceFile};

use super::errno::MAX_KEYS;
use super::histogram::{Histogram, Seen};
use super::latency::{LatencyGroup, uint};
use super::pass::{At, Finish, Pass};
use super::{Analysis, AnalysisName, Selection};

/// The fields a block request event is read by.
#[derive(Clone)]
struct Fields {
    dev: IntField,
    sector: IntField,
    nr_sector: IntField,
}

#[derive(Clone)]
enum Role {
    None,
    Issue(Fields),
    Complete(Fields),
}

/// Issue-to-complete latency of block requests.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Block {
    /// Requests paired (issue, then complete of the same device and sector).
    pub(crate) requests: u64,
    /// Completes with no issue seen (issued before the recording started).
    pub(crate) unpaired: u64,
    /// Issues not followed: past the limit of requests in flight, devices or sizes.
    pub(crate) untracked: u64,
    /// Per device (`MAJ:MIN`), most requests first.
    pub(crate) devices: Vec<LatencyGroup>,
    /// Per request size (`4096 B`), smallest first.
    pub(crate) sizes: Vec<LatencyGroup>,
}

/// The state of one pass.
pub(super) struct BlockIo {
    roles: Vec<Role>,
    /// In flight: (dev, sector) → (issue ts, bytes).
    pending: FxHashMap<(u64, u64), (u64, u64)>,
    devices: FxHashMap<u64, Histogram>,
    sizes: FxHashMap<u64, Histogram>,
    requests: u64,
    unpaired: u64,
    untracked: u64,
}

impl BlockIo {
    /// Whether `file` has both block request formats.
    pub(super) fn applies(file: &TraceFile) -> bool {
        let roles: Vec<Role> = file.formats().map(role).collect();
        roles.iter().any(|r| matches!(r, Role::Issue(_)))
            && roles.iter().any(|r| matches!(r, Role::Complete(_)))
    }

    pub(super) fn new(file: &TraceFile) -> BlockIo {
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        for f in file.formats() {
            roles[f.id as usize] = role(f);
        }
        BlockIo {
            roles,
            pending: FxHashMap::default(),
            devices: FxHashMap::default(),
            sizes: FxHashMap::default(),
            requests: 0,
            unpaired: 0,
            untracked: 0,
        }
    }

    #[inline]
    fn event(&mut self, ev: &Event<'_>) {
        // The reader gives each record its own format (`analyze_kept` feeds
        // no record of an unknown one): the id is the format's.
        let id = usize::from(ev.format.id);
        let (issue, f) = match self.roles.get(id) {
            Some(Role::Issue(f)) => (true, f),
            Some(Role::Complete(f)) => (false, f),
            _ => return,
        };
        let (Some(dev), Some(sector)) = (uint(&f.dev, ev), uint(&f.sector, ev)) else {
            return;
        };
        if issue {
            let bytes = uint(&f.nr_sector, ev).unwrap_or(0) * 512;
            if self.pending.len() < MAX_KEYS || self.pending.contains_key(&(dev, sector)) {
                self.pending.insert((dev, sector), (ev.ts, bytes));
            } else {
                self.untracked += 1;
            }
            return;
        }
        let Some((start, bytes)) = self.pending.remove(&(dev, sector)) else {
            self.unpaired += 1;
            return;
        };
        let d = ev.ts.saturating_sub(start);
        let at = Seen {
            ts: ev.ts,
            cpu: ev.cpu,
        };
        let (nd, ns) = (self.devices.len(), self.sizes.len());
        match (
            self.devices.contains_key(&dev) || nd < MAX_KEYS,
            self.sizes.contains_key(&bytes) || ns < MAX_KEYS,
        ) {
            (true, true) => {
                self.devices.entry(dev).or_default().add(d, at);
                self.sizes.entry(bytes).or_default().add(d, at);
                self.requests += 1;
            }
            _ => self.untracked += 1,
        }
    }

    fn block(self) -> Block {
        let mut devices: Vec<(u64, LatencyGroup)> = self
            .devices
            .iter()
            .map(|(dev, h)| {
                let key = format!("{}:{}", dev >> 20, dev & 0xfffff);
                (*dev, LatencyGroup::of(key, h))
            })
            .collect();
        devices.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(&b.0)));
        let mut sizes: Vec<(u64, &Histogram)> = self.sizes.iter().map(|(b, h)| (*b, h)).collect();
        sizes.sort_by_key(|(b, _)| *b);
        Block {
            requests: self.requests,
            unpaired: self.unpaired,
            untracked: self.untracked,
            devices: devices.into_iter().map(|(_, g)| g).collect(),
            sizes: sizes
                .into_iter()
                .map(|(b, h)| LatencyGroup::of(format!("{b} B"), h))
                .collect(),
        }
    }
}

fn role(f: &tracedat::EventFormat) -> Role {
    if f.system != "block" {
        return Role::None;
    }
    let fields = || {
        Some(Fields {
            dev: f.field("dev")?.int(),
            sector: f.field("sector")?.int(),
            nr_sector: f.field("nr_sector")?.int(),
        })
    };
    match (f.name.as_str(), fields()) {
        ("block_rq_issue", Some(x)) => Role::Issue(x),
        ("block_rq_complete", Some(x)) => Role::Complete(x),
        _ => Role::None,
    }
}

impl Pass for BlockIo {
    fn start(file: &TraceFile, sel: &Selection) -> Option<BlockIo> {
        sel.has(AnalysisName::Block).then(|| BlockIo::new(file))
    }

    fn handles(&self, id: u16) -> bool {
        !matches!(self.roles.get(usize::from(id)), None | Some(Role::None))
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        self.event(at.ev);
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        let b = self.block();
        let kept = cx.keeps(b.requests + b.unpaired + b.untracked > 0);
        out.section(AnalysisName::Block, kept, b.requests > 0);
        out.block = kept.then_some(b);
    }
}
