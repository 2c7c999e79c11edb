//! "Did you mean" suggestions by string similarity.

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
}
