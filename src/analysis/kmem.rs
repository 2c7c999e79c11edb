//! The `kmem` analysis: slab allocations by call site and by size, with what
//! the trace never saw freed.
//!
//! It reads `call_site`, `ptr`, `bytes_req` and `bytes_alloc` of the kmem
//! allocation events (`kmem:kmalloc`, `kmem:kmalloc_node`,
//! `kmem:kmem_cache_alloc`, `kmem:kmem_cache_alloc_node`) and `ptr` of the free
//! events (`kmem:kfree`, `kmem:kmem_cache_free`). A call site is the function
//! that `call_site` falls in, through the file's kallsyms (trace-cmd prints
//! `call_site=foo+0x12`; this groups by `foo`; an address kallsyms does not
//! cover stays `0xADDR`). Waste is `bytes_alloc - bytes_req`: what the slab
//! size class adds to what was asked.
//!
//! A free is paired with the allocation of the same `ptr` seen before it; the
//! allocation's call site is credited with the free. An allocation not freed
//! by the end of the trace is outstanding. Frees of `NULL` and
//! `ZERO_SIZE_PTR` (`ptr` ≤ 16, which the kernel traces and ignores) are
//! skipped; frees of pointers allocated before the trace (or by an
//! allocation the recipe's filter or scope left out) count in `frees_unpaired`.
//! Outstanding figures are given only when the trace holds a free event.
//!
//! Memory is bounded: at most [`MAX_KEYS`] call sites and sizes, and
//! [`MAX_LIVE`] live pointers; allocations past the site or size cap count in
//! `untracked`, past the pointer cap in `unfollowed` (their frees then count as
//! unpaired). Per event the pass reads up to four fields, finds the site by a
//! hash of the address (each distinct address is symbolized once) and updates
//! counters.

use rustc_hash::FxHashMap;
use serde::Serialize;
use tracedat::{Event, Field, IntField, TraceFile};

use super::errno::MAX_KEYS;
use super::function_name;
use super::latency::uint;
use super::pass::{At, Finish, Pass};
use super::{Analysis, AnalysisName, Selection};

/// Live (allocated, not yet freed) pointers followed at once.
pub(crate) const MAX_LIVE: usize = 1 << 18;
/// Call sites the report lists (most bytes allocated first).
const MAX_SITES: usize = 40;
/// Sizes the report lists (most allocations first).
const MAX_SIZES: usize = 40;
/// Pointers up to this are `NULL` or `ZERO_SIZE_PTR` (include/linux/slab.h).
const ZERO_OR_NULL: u64 = 16;

/// The fields of an allocation event.
#[derive(Clone)]
struct AllocFields {
    call_site: IntField,
    ptr: IntField,
    bytes_req: IntField,
    bytes_alloc: IntField,
}

#[derive(Clone)]
enum Role {
    None,
    Alloc(Box<AllocFields>),
    Free(IntField),
}

/// Slab allocations by call site and size.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub(crate) struct Kmem {
    /// Allocation events read (`kmalloc`, `kmem_cache_alloc`, their `_node` forms).
    pub(crate) allocs: u64,
    /// Bytes asked for (`bytes_req`), all allocations.
    pub(crate) bytes_req: u64,
    /// Bytes given (`bytes_alloc`), all allocations.
    pub(crate) bytes_alloc: u64,
    /// `bytes_alloc - bytes_req`, all allocations.
    pub(crate) waste: u64,
    /// Whether a free event (`kfree`, `kmem_cache_free`) was read: the
    /// `freed` and `outstanding` figures mean something only then (a file
    /// may hold the format of an event that was not enabled: trace-cmd's do).
    pub(crate) frees_recorded: bool,
    /// Free events of a non-NULL pointer read.
    pub(crate) frees: u64,
    /// Of those, frees of a pointer with no allocation seen before it.
    pub(crate) frees_unpaired: u64,
    /// Allocations not freed by the end of the trace.
    pub(crate) outstanding: u64,
    /// Their `bytes_alloc`.
    pub(crate) outstanding_bytes: u64,
    /// Allocations in no call-site or size row: past [`MAX_KEYS`] sites or sizes.
    pub(crate) untracked: u64,
    /// Allocations whose pointer was not followed: past `MAX_LIVE` (262144) live pointers.
    pub(crate) unfollowed: u64,
    /// Call sites there were in all (only the first 40 are listed).
    pub(crate) call_sites_total: usize,
    /// Per call site (function), most bytes allocated first.
    pub(crate) call_sites: Vec<KmemSite>,
    /// Sizes there were in all (only the first 40 are listed).
    pub(crate) sizes_total: usize,
    /// Per allocated size (`bytes_alloc`, the slab size class), most allocations first.
    pub(crate) sizes: Vec<KmemSize>,
}

/// The allocations of one call site.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct KmemSite {
    /// The function `call_site` falls in (`0xADDR` when kallsyms does not cover it).
    pub(crate) call_site: String,
    /// Allocations.
    pub(crate) allocs: u64,
    /// Bytes asked for.
    pub(crate) bytes_req: u64,
    /// Bytes given.
    pub(crate) bytes_alloc: u64,
    /// `bytes_alloc - bytes_req`.
    pub(crate) waste: u64,
    /// Of its allocations, those freed in the trace.
    pub(crate) freed: u64,
    /// Of its allocations, those not freed by the end of the trace.
    pub(crate) outstanding: u64,
    /// Their `bytes_alloc`.
    pub(crate) outstanding_bytes: u64,
}

/// The allocations of one size class.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct KmemSize {
    /// `bytes_alloc` of these allocations.
    pub(crate) bytes_alloc: u64,
    /// Allocations.
    pub(crate) allocs: u64,
    /// Smallest `bytes_req` among them.
    pub(crate) min_req: u64,
    /// Largest `bytes_req` among them.
    pub(crate) max_req: u64,
    /// `bytes_alloc - bytes_req` summed over them.
    pub(crate) waste: u64,
}

/// Counters of one call site while the pass runs.
#[derive(Default)]
struct Site {
    allocs: u64,
    bytes_req: u64,
    bytes_alloc: u64,
    freed: u64,
}

/// The state of one pass.
pub(super) struct KmemPass {
    roles: Vec<Role>,
    frees_recorded: bool,
    /// Call-site address → index into `sites`.
    site_of: FxHashMap<u64, usize>,
    /// Per function: its name and counters.
    sites: Vec<(String, Site)>,
    site_by_name: FxHashMap<String, usize>,
    /// bytes_alloc → (allocs, min_req, max_req, waste).
    sizes: FxHashMap<u64, (u64, u64, u64, u64)>,
    /// Live pointer → (site, bytes_alloc).
    live: FxHashMap<u64, (usize, u64)>,
    allocs: u64,
    bytes_req: u64,
    bytes_alloc: u64,
    frees: u64,
    frees_unpaired: u64,
    untracked: u64,
    unfollowed: u64,
}

impl KmemPass {
    /// Whether `file` has the format of a kmem allocation event.
    pub(super) fn applies(file: &TraceFile) -> bool {
        file.formats().any(|f| matches!(role(f), Role::Alloc(_)))
    }

    pub(super) fn new(file: &TraceFile) -> KmemPass {
        let max_id = file.formats().map(|f| f.id as usize).max().unwrap_or(0);
        let mut roles = vec![Role::None; max_id + 1];
        for f in file.formats() {
            roles[f.id as usize] = role(f);
        }
        KmemPass {
            frees_recorded: false,
            roles,
            site_of: FxHashMap::default(),
            sites: Vec::new(),
            site_by_name: FxHashMap::default(),
            sizes: FxHashMap::default(),
            live: FxHashMap::default(),
            allocs: 0,
            bytes_req: 0,
            bytes_alloc: 0,
            frees: 0,
            frees_unpaired: 0,
            untracked: 0,
            unfollowed: 0,
        }
    }

    /// The site index of `addr`, made on first sight; `None` past [`MAX_KEYS`].
    fn site(&mut self, file: &TraceFile, addr: u64) -> Option<usize> {
        if let Some(s) = self.site_of.get(&addr) {
            return Some(*s);
        }
        let name = function_name(file, addr);
        let s = match self.site_by_name.get(&name) {
            Some(s) => *s,
            None if self.sites.len() < MAX_KEYS => {
                self.sites.push((name.clone(), Site::default()));
                self.site_by_name.insert(name, self.sites.len() - 1);
                self.sites.len() - 1
            }
            None => return None,
        };
        // Addresses are bounded by the sites: a site has few call addresses,
        // but a hostile file may give each event its own.
        if self.site_of.len() < 4 * MAX_KEYS {
            self.site_of.insert(addr, s);
        }
        Some(s)
    }

    #[inline]
    fn event(&mut self, file: &TraceFile, ev: &Event<'_>) {
        // The reader gives each record its own format (`analyze_kept` feeds
        // no record of an unknown one): the id is the format's.
        let id = usize::from(ev.format.id);
        let (site, req, alloc, ptr) = match self.roles.get(id) {
            Some(Role::Alloc(f)) => (
                uint(&f.call_site, ev),
                uint(&f.bytes_req, ev),
                uint(&f.bytes_alloc, ev),
                uint(&f.ptr, ev),
            ),
            Some(Role::Free(ptr)) => {
                self.frees_recorded = true;
                if let Some(p) = uint(ptr, ev).filter(|p| *p > ZERO_OR_NULL) {
                    self.free(p);
                }
                return;
            }
            _ => return,
        };
        let (Some(site), Some(req), Some(alloc)) = (site, req, alloc) else {
            return;
        };
        self.allocs += 1;
        self.bytes_req = self.bytes_req.saturating_add(req);
        self.bytes_alloc = self.bytes_alloc.saturating_add(alloc);
        let waste = alloc.saturating_sub(req);
        let n = self.sizes.len();
        let Some(s) = self
            .site(file, site)
            .filter(|_| self.sizes.contains_key(&alloc) || n < MAX_KEYS)
        else {
            self.untracked += 1;
            return;
        };
        let c = &mut self.sites[s].1;
        c.allocs += 1;
        c.bytes_req = c.bytes_req.saturating_add(req);
        c.bytes_alloc = c.bytes_alloc.saturating_add(alloc);
        let z = self.sizes.entry(alloc).or_insert((0, u64::MAX, 0, 0));
        *z = (
            z.0 + 1,
            z.1.min(req),
            z.2.max(req),
            z.3.saturating_add(waste),
        );
        let Some(p) = ptr.filter(|p| *p > ZERO_OR_NULL) else {
            return;
        };
        if self.live.len() < MAX_LIVE || self.live.contains_key(&p) {
            // A pointer still live was freed unseen (a free the scope left out):
            // the newer allocation replaces it.
            self.live.insert(p, (s, alloc));
        } else {
            self.unfollowed += 1;
        }
    }

    /// A free of the non-NULL pointer `p`.
    fn free(&mut self, p: u64) {
        self.frees += 1;
        match self.live.remove(&p) {
            Some((s, _)) => self.sites[s].1.freed += 1,
            None => self.frees_unpaired += 1,
        }
    }

    fn kmem(self) -> Kmem {
        // Per site: (outstanding, bytes).
        let mut out = vec![(0u64, 0u64); self.sites.len()];
        for (s, bytes) in self.live.values() {
            out[*s] = (out[*s].0 + 1, out[*s].1.saturating_add(*bytes));
        }
        let recorded = self.frees_recorded;
        let mut sites: Vec<KmemSite> = self
            .sites
            .into_iter()
            .zip(out)
            .filter(|((_, c), _)| c.allocs > 0)
            .map(|((name, c), (n, bytes))| KmemSite {
                call_site: name,
                allocs: c.allocs,
                bytes_req: c.bytes_req,
                bytes_alloc: c.bytes_alloc,
                waste: c.bytes_alloc.saturating_sub(c.bytes_req),
                freed: c.freed,
                outstanding: if recorded { n } else { 0 },
                outstanding_bytes: if recorded { bytes } else { 0 },
            })
            .collect();
        sites.sort_by(|a, b| {
            b.bytes_alloc
                .cmp(&a.bytes_alloc)
                .then(b.allocs.cmp(&a.allocs))
                .then_with(|| a.call_site.cmp(&b.call_site))
        });
        let mut sizes: Vec<KmemSize> = self
            .sizes
            .iter()
            .map(|(alloc, (n, lo, hi, waste))| KmemSize {
                bytes_alloc: *alloc,
                allocs: *n,
                min_req: *lo,
                max_req: *hi,
                waste: *waste,
            })
            .collect();
        sizes.sort_by(|a, b| {
            b.allocs
                .cmp(&a.allocs)
                .then(a.bytes_alloc.cmp(&b.bytes_alloc))
        });
        let (outstanding, outstanding_bytes) = if recorded {
            sites.iter().fold((0u64, 0u64), |(n, b), s| {
                (n + s.outstanding, b.saturating_add(s.outstanding_bytes))
            })
        } else {
            (0, 0)
        };
        let (call_sites_total, sizes_total) = (sites.len(), sizes.len());
        sites.truncate(MAX_SITES);
        sizes.truncate(MAX_SIZES);
        Kmem {
            allocs: self.allocs,
            bytes_req: self.bytes_req,
            bytes_alloc: self.bytes_alloc,
            waste: self.bytes_alloc.saturating_sub(self.bytes_req),
            frees_recorded: recorded,
            frees: self.frees,
            frees_unpaired: self.frees_unpaired,
            outstanding,
            outstanding_bytes,
            untracked: self.untracked,
            unfollowed: self.unfollowed,
            call_sites_total,
            call_sites: sites,
            sizes_total,
            sizes,
        }
    }
}

fn role(f: &tracedat::EventFormat) -> Role {
    if f.system != "kmem" {
        return Role::None;
    }
    match f.name.as_str() {
        "kmalloc" | "kmalloc_node" | "kmem_cache_alloc" | "kmem_cache_alloc_node" => {
            let fields = || {
                Some(AllocFields {
                    call_site: f.field("call_site")?.int(),
                    ptr: f.field("ptr")?.int(),
                    bytes_req: f.field("bytes_req")?.int(),
                    bytes_alloc: f.field("bytes_alloc")?.int(),
                })
            };
            fields().map_or(Role::None, |f| Role::Alloc(Box::new(f)))
        }
        "kfree" | "kmem_cache_free" => f
            .field("ptr")
            .map(Field::int)
            .map_or(Role::None, Role::Free),
        _ => Role::None,
    }
}

impl Pass for KmemPass {
    fn start(file: &TraceFile, sel: &Selection) -> Option<KmemPass> {
        sel.has(AnalysisName::Kmem).then(|| KmemPass::new(file))
    }

    fn handles(&self, id: u16) -> bool {
        !matches!(self.roles.get(usize::from(id)), None | Some(Role::None))
    }

    #[inline]
    fn add(&mut self, at: &At<'_, '_>) {
        self.event(at.file, at.ev);
    }

    fn finish(self, cx: &Finish<'_>, out: &mut Analysis) {
        let k = self.kmem();
        let kept = cx.keeps(k.allocs + k.frees > 0);
        out.section(AnalysisName::Kmem, kept, k.allocs > 0);
        out.kmem = kept.then_some(k);
    }
}
