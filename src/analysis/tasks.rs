//! Per-task state kept by pid slot: the summary pass numbers pids in the
//! order of their first event (see `analyze_kept`) and hands each record's
//! slot to the analyses, so a task's state is found by indexing, not by
//! hashing its pid for every record.

/// State of type `T` per pid slot, for at most `limit` tasks: past it a task
/// that has no state yet gets none (it is not followed).
///
/// Memory: one `Option<T>` per slot up to the highest slot seen, plus the
/// `T`s of the tasks followed.
pub(super) struct TaskSlots<T> {
    slots: Vec<Option<T>>,
    followed: usize,
    limit: usize,
}

impl<T: Default> TaskSlots<T> {
    /// No tasks yet; at most `limit` followed.
    pub(super) fn new(limit: usize) -> TaskSlots<T> {
        TaskSlots {
            slots: Vec::new(),
            followed: 0,
            limit,
        }
    }

    /// The state of slot `slot`, made on first use; `None` when the task is
    /// not followed (the limit was reached before its first use).
    #[inline]
    pub(super) fn get(&mut self, slot: usize) -> Option<&mut T> {
        // Checked twice so that the common case, a task followed already,
        // takes one branch (the borrow checker refuses a single lookup).
        if matches!(self.slots.get(slot), Some(Some(_))) {
            return self.slots[slot].as_mut();
        }
        self.start(slot)
    }

    /// The states of the tasks followed, in slot order.
    pub(super) fn into_values(self) -> impl Iterator<Item = T> {
        self.slots.into_iter().flatten()
    }

    /// [`TaskSlots::get`] for a slot with no state yet.
    #[cold]
    fn start(&mut self, slot: usize) -> Option<&mut T> {
        if slot >= self.slots.len() {
            self.slots.resize_with(slot + 1, || None);
        }
        let s = &mut self.slots[slot];
        if s.is_none() {
            if self.followed >= self.limit {
                return None;
            }
            self.followed += 1;
            *s = Some(T::default());
        }
        s.as_mut()
    }
}

/// Pids below this (the kernel's PID_MAX_LIMIT on 64-bit, 4 Mi; see
/// include/linux/threads.h) are found through a table, others (from a
/// 32-bit pid space or a hostile file) through a map.
const DIRECT_PIDS: usize = 1 << 22;

/// Dense indices of pids in order of first use, for per-task state kept in
/// a vector: a pid is found by one table load instead of hashing it.
///
/// Memory: the table is 16 MiB of address space, allocated zeroed, so only
/// the pages of the pids met are ever touched (4 KiB per 1024 pids).
pub(super) struct PidIndex {
    /// Per pid: its index + 1, 0 for none, or [`REFUSED`].
    table: Vec<u32>,
    other: rustc_hash::FxHashMap<i32, u32>,
    len: usize,
    /// Pids of the table refused an index because the limit was reached,
    /// each counted once ([`PidIndex::refused`]).
    refused: usize,
}

/// A table entry: this pid came after the limit and has no index.
const REFUSED: u32 = u32::MAX;

impl PidIndex {
    pub(super) fn new() -> PidIndex {
        PidIndex {
            table: Vec::new(),
            other: rustc_hash::FxHashMap::default(),
            len: 0,
            refused: 0,
        }
    }

    /// How many pids were refused an index because `limit` indices were
    /// taken, each counted once (pids outside the table, which only a
    /// hostile file has, are not counted: remembering them would cost memory
    /// without bound).
    pub(super) fn refused(&self) -> usize {
        self.refused
    }

    /// The index of `pid`, if it has one.
    #[inline]
    pub(super) fn get(&self, pid: i32) -> Option<usize> {
        match usize::try_from(pid) {
            Ok(p) if p < DIRECT_PIDS => match self.table.get(p) {
                Some(&i) if i > 0 && i != REFUSED => Some(i as usize - 1),
                _ => None,
            },
            _ => self.get_other(pid),
        }
    }

    /// [`PidIndex::get`] of a pid outside the table.
    #[cold]
    fn get_other(&self, pid: i32) -> Option<usize> {
        self.other.get(&pid).map(|&i| i as usize)
    }

    /// The index of `pid`, the next free one on first use; `None` when it
    /// has none and `limit` indices are taken.
    #[inline]
    pub(super) fn get_or_insert(&mut self, pid: i32, limit: usize) -> Option<usize> {
        match self.get(pid) {
            Some(i) => Some(i),
            None => self.insert(pid, limit),
        }
    }

    /// [`PidIndex::get_or_insert`] of a pid with no index yet.
    #[cold]
    fn insert(&mut self, pid: i32, limit: usize) -> Option<usize> {
        if self.len >= limit || self.len >= u32::MAX as usize - 1 {
            if let Ok(p) = usize::try_from(pid)
                && p < DIRECT_PIDS
            {
                if self.table.is_empty() {
                    self.table = vec![0; DIRECT_PIDS];
                }
                if self.table[p] != REFUSED {
                    self.table[p] = REFUSED;
                    self.refused += 1;
                }
            }
            return None;
        }
        let i = self.len;
        match usize::try_from(pid) {
            Ok(p) if p < DIRECT_PIDS => {
                if self.table.is_empty() {
                    self.table = vec![0; DIRECT_PIDS];
                }
                self.table[p] = i as u32 + 1;
            }
            _ => {
                self.other.insert(pid, i as u32);
            }
        }
        self.len += 1;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::{PidIndex, TaskSlots};

    #[test]
    fn pids_get_dense_indices_in_order_of_first_use_up_to_the_limit() {
        let mut p = PidIndex::new();
        // Through the table, past it (a 32-bit pid space), and negative
        // (a hostile file): each gets the next index, once.
        for (pid, want) in [(7, 0), (1 << 22, 1), (-5, 2), (7, 0), (i32::MAX, 3)] {
            assert_eq!(p.get_or_insert(pid, 4), Some(want), "pid {pid}");
        }
        assert_eq!(p.get_or_insert(8, 4), None, "the limit is reached");
        assert_eq!(p.get_or_insert(8, 4), None, "and stays reached");
        assert_eq!(p.get_or_insert(9, 4), None);
        assert_eq!(p.refused(), 2, "8 and 9, each once");
        assert_eq!(
            (p.get(-5), p.get(1 << 22), p.get(8)),
            (Some(2), Some(1), None)
        );
    }

    #[test]
    fn a_task_past_the_limit_is_not_followed() {
        let mut t: TaskSlots<Vec<u8>> = TaskSlots::new(2);
        t.get(5).unwrap().push(1);
        t.get(0).unwrap().push(2);
        assert!(t.get(1).is_none(), "a third task");
        assert_eq!(t.get(5).map(|v| v.clone()), Some(vec![1]));
    }
}
