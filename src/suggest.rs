//! "Did you mean" suggestions by string similarity.
//!
//! Comparing costs up to the product of the two lengths, and a hostile recipe
//! may ask for thousands of suggestions (8,000 unknown events, each against
//! every event of the kernel; an unknown probe symbol against all of
//! kallsyms), so the process has a budget of [`BUDGET`] character pairs:
//! once a search would go past it, the budget is spent and no more
//! suggestions are made, each later search returning before it looks at a
//! candidate (the problems are still all reported, without a `did you
//! mean`). Thousands of problems thus cost the budget once, not thousands
//! of walks of the candidates.

use std::sync::atomic::{AtomicU64, Ordering};

/// Character pairs (length × length, summed over comparisons) the process
/// may spend on suggestions: about 1,000 searches of an unknown event name
/// among 2,000 kernel events, a second or two.
pub(crate) const BUDGET: u64 = 1_000_000_000;

/// What is left of [`BUDGET`].
static LEFT: AtomicU64 = AtomicU64::new(BUDGET);

/// Takes `cost` from the budget `left`; when it has not that much left,
/// false, and the budget is spent (set to zero) for every later search.
fn spend(left: &AtomicU64, cost: u64) -> bool {
    let ok = left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            left.checked_sub(cost)
        })
        .is_ok();
    if !ok {
        left.store(0, Ordering::Relaxed);
    }
    ok
}

/// The candidate nearest to `word` (Jaro-Winkler similarity of at least 0.8), if any.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    nearest_n(word, candidates, 1).into_iter().next()
}

/// Up to `n` candidates nearest to `word`, best first, each at least 0.8 similar.
pub fn nearest_n<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    nearest_within(&LEFT, word, candidates, n)
}

/// [`nearest_n`] paid from the budget `left`.
fn nearest_within<'a>(
    left: &AtomicU64,
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    if left.load(Ordering::Relaxed) == 0 {
        return Vec::new();
    }
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let width = word.len() as u64 + 1;
    let cost = candidates
        .iter()
        .map(|c| width.saturating_mul(c.len() as u64 + 1))
        .fold(0u64, u64::saturating_add);
    if !spend(left, cost) {
        return Vec::new();
    }
    let mut scored: Vec<(f64, &str)> = candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(s, _)| *s >= 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

/// `"did you mean `a`, `b`? "` for up to `n` candidates near `word` (trailing
/// space included, to prefix a longer help), or `""` when none is near.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> String {
    let near = nearest_n(word, candidates, n);
    if near.is_empty() {
        return String::new();
    }
    let list: Vec<String> = near.iter().map(|c| format!("`{c}`")).collect();
    format!("did you mean {}? ", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::did_you_mean;

    #[test]
    fn suggests_near_names_only() {
        assert_eq!(
            did_you_mean("sched_swtch", ["sched_switch", "irq"], 3),
            "did you mean `sched_switch`? "
        );
        assert_eq!(did_you_mean("xyz", ["sched_switch"], 3), "");
    }

    /// Suggestions stop, and cost nothing more, once the budget is spent.
    #[test]
    fn suggestions_stop_when_the_budget_is_spent() {
        use std::sync::atomic::{AtomicU64, Ordering};
        // Each search costs (11 + 1) × (12 + 1) = 156 character pairs.
        let left = AtomicU64::new(3 * 156 + 39);
        let near = |left| super::nearest_within(left, "sched_swtch", ["sched_switch"], 1);
        for _ in 0..3 {
            assert_eq!(near(&left), ["sched_switch"]);
        }
        assert_eq!(left.load(Ordering::Relaxed), 39);
        assert!(near(&left).is_empty());
        // The search that did not fit spent the budget: later ones return
        // without looking at a single candidate, however many there are.
        assert_eq!(left.load(Ordering::Relaxed), 0);
        let looked = std::cell::Cell::new(0);
        let many = (0..10_000).map(|_| {
            looked.set(looked.get() + 1);
            "sched_switch"
        });
        assert!(super::nearest_within(&left, "sched_swtch", many, 1).is_empty());
        assert_eq!(looked.get(), 0);
    }
}
