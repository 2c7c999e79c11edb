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
