//! Flame graphs of report.html, drawn by the `inferno` crate from folded
//! stacks ([`Folded`]), made fit to sit inline in the page: no XML prolog, no
//! script (inferno's zoom and search need one; the page has none), no
//! references (`url(#...)`), and its element ids and their style rules
//! prefixed with the graph's anchor, so that two graphs of one page keep
//! distinct ids. Frame names come from the trace (kallsyms of a
//! possibly hostile file): inferno escapes every text and attribute it
//! writes, and the test `hostile_symbols_are_escaped` holds it to that.

use inferno::flamegraph::{Options, Palette, color::BasicPalette, from_lines};

use crate::analysis::Folded;
use crate::report::tracer::StackTracerReport;

/// Width of a flame graph, in CSS pixels.
const WIDTH: usize = 1000;

/// The flame graph of `folded` as an inline `<svg>` element, each frame's
/// width its weight in `unit` (`records`, `ns`, `bytes`), its element ids
/// prefixed with `anchor-` (`stacks-frames`, ...); `None` when there is
/// nothing to draw or inferno refuses the input.
pub(crate) fn svg(
    anchor: &str,
    folded: &Folded,
    title: &str,
    unit: &str,
    palette: BasicPalette,
) -> Option<String> {
    if folded.is_empty() {
        return None;
    }
    let text = folded.text();
    let mut opt = Options::default();
    opt.title = title.to_string();
    opt.count_name = unit.to_string();
    opt.colors = Palette::Basic(palette);
    opt.hash = true;
    opt.deterministic = true;
    opt.no_javascript = true;
    opt.image_width = Some(WIDTH);
    let mut out = Vec::new();
    from_lines(&mut opt, text.lines(), &mut out).ok()?;
    let s = String::from_utf8(out).ok()?;
    Some(inline(&s, anchor))
}

/// inferno's document as an element of the page: from `<svg` on, without
/// its `<script>` element, `onload` handler, search button and the
/// background gradient (a `url(#...)` reference, a flat colour instead),
/// with its ids prefixed by `anchor` ([`prefix_ids`]).
fn inline(doc: &str, anchor: &str) -> String {
    let mut s = doc[doc.find("<svg").unwrap_or(0)..].to_string();
    cut(&mut s, "<script", "</script>");
    cut(&mut s, "<text id=\"search\"", "</text>");
    cut(&mut s, "<text id=\"unzoom\"", "</text>");
    let s = s
        .replacen(" onload=\"init(evt)\"", "", 1)
        .replacen(
            "fill=\"url(#background)\"",
            "fill=\"#f8f8f4\" class=\"flame-bg\"",
            1,
        )
        .replacen("<svg ", "<svg class=\"flamegraph\" ", 1);
    prefix_ids(&s, anchor)
}

/// The ids inferno gives its elements and names in its style rules.
const INFERNO_IDS: [&str; 8] = [
    "background",
    "title",
    "subtitle",
    "details",
    "matched",
    "search",
    "unzoom",
    "frames",
];

/// `svg` with each of inferno's ids, `id="X"`, renamed `anchor-X`, and so in
/// its `<style>` element's `#X` selectors (only there: a frame name may hold
/// `#X`, but never a `"`, which inferno escapes).
fn prefix_ids(svg: &str, anchor: &str) -> String {
    let mut out = svg.to_string();
    for id in INFERNO_IDS {
        out = out.replace(&format!("id=\"{id}\""), &format!("id=\"{anchor}-{id}\""));
    }
    if let Some(a) = out.find("<style")
        && let Some(b) = out[a..].find("</style>")
    {
        let mut style = out[a..a + b].to_string();
        for id in INFERNO_IDS {
            style = rename_selector(&style, id, anchor);
        }
        out.replace_range(a..a + b, &style);
    }
    out
}

/// `css` with every `#id` selector not followed by a name character renamed
/// `#anchor-id` (so `#search` does not also rename `#searchbox`).
fn rename_selector(css: &str, id: &str, anchor: &str) -> String {
    let pat = format!("#{id}");
    let mut out = String::with_capacity(css.len());
    let mut rest = css;
    while let Some(i) = rest.find(&pat) {
        let after = &rest[i + pat.len()..];
        out.push_str(&rest[..i]);
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            out.push_str(&pat);
        } else {
            out.push_str(&format!("#{anchor}-{id}"));
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Removes the first `start` .. `end` span of `s` (both included), if any.
/// inferno writes these before any frame, and escapes `<` in every frame
/// name, so the first match is its own element.
fn cut(s: &mut String, start: &str, end: &str) {
    if let Some(a) = s.find(start)
        && let Some(b) = s[a..].find(end)
    {
        s.replace_range(a..a + b + end.len(), "");
    }
}

/// The stack tracer's deepest stack folded: one path per frame, outermost
/// first, weighted by the bytes of stack that frame itself used
/// (`size_bytes`), so each frame is as wide as the stack it and its callees
/// took. Locations lose their `+0xoff/0xlen`.
pub(crate) fn stack_tracer_folded(s: &StackTracerReport) -> Folded {
    let names: Vec<&str> = s
        .frames
        .iter()
        .rev()
        .map(|f| f.location.split('+').next().unwrap_or(""))
        .collect();
    let mut folded = Folded::default();
    for i in 0..names.len() {
        let size = s.frames[names.len() - 1 - i].size_bytes;
        folded.add(names[..=i].iter().copied(), size);
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_symbols_are_escaped() {
        let mut f = Folded::default();
        f.add(
            [
                "sched:sched_switch",
                "<script>alert(1)</script>",
                "a&b\"c'd<img>",
            ],
            3,
        );
        f.add(["sched:sched_switch", "schedule"], 1);
        let s = svg("stacks", &f, "t", "records", BasicPalette::Hot).unwrap();
        assert!(s.starts_with("<svg class=\"flamegraph\" "), "{s}");
        for bad in ["<script", "<img", "onload", "url(", "<?xml", "<!DOCTYPE"] {
            assert!(!s.contains(bad), "`{bad}` in {s}");
        }
        assert!(s.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{s}");
        assert!(s.contains("schedule (1 records, 25.00%)"), "{s}");
    }

    #[test]
    fn two_graphs_of_one_page_share_no_id() {
        let mut f = Folded::default();
        f.add(["#title", "#frames x"], 2);
        let ids = |s: &str| -> Vec<String> {
            s.match_indices(" id=\"")
                .map(|(i, _)| s[i + 5..].split('"').next().unwrap_or("").to_string())
                .collect()
        };
        let a = svg("stacks", &f, "t", "records", BasicPalette::Hot).unwrap();
        let b = svg("funcgraph", &f, "t", "ns", BasicPalette::Aqua).unwrap();
        let (ia, ib) = (ids(&a), ids(&b));
        assert!(ia.contains(&"stacks-frames".to_string()), "{ia:?}");
        assert!(ia.iter().all(|i| !ib.contains(i)), "{ia:?} {ib:?}");
        assert!(a.contains("#stacks-title {"), "{a}");
        assert!(!a.contains("#title {"), "{a}");
        // A frame named like a selector is text, left as it is.
        assert!(a.contains("<title>#title ("), "{a}");
    }

    #[test]
    fn the_deepest_stack_is_weighted_by_each_frame_s_bytes() {
        let frame = |location: &str, size_bytes: u64| crate::report::tracer::StackFrame {
            depth_bytes: 0,
            size_bytes,
            location: location.to_string(),
        };
        let s = StackTracerReport {
            max_stack_bytes: 200,
            frames: vec![frame("inner+0x1/0x2", 50), frame("outer+0x3/0x4", 150)],
            file: String::new(),
        };
        assert_eq!(
            stack_tracer_folded(&s).text(),
            "outer 150\nouter;inner 50\n"
        );
    }
}
