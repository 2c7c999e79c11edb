//! The live display of a recording (`run` on a terminal): elapsed vs duration,
//! events and MiB captured, events lost so far. Drawn with indicatif on stderr,
//! and only when stderr is a terminal: piped or redirected, `run` prints its
//! usual lines and the final summary, nothing else.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::run::Progress;

/// The progress bar of one run (inactive when stderr is not a terminal).
#[derive(Debug)]
pub struct ProgressDisplay {
    bar: Option<ProgressBar>,
}

impl Default for ProgressDisplay {
    fn default() -> Self {
        Self::new()
    }
}

impl ProgressDisplay {
    /// A display on stderr if it is a terminal, else one that shows nothing.
    pub fn new() -> ProgressDisplay {
        ProgressDisplay {
            bar: std::io::stderr().is_terminal().then(|| {
                let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {wide_bar} {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar
            }),
        }
    }

    /// Shows `p`.
    pub fn update(&mut self, p: &Progress) {
        let Some(bar) = &self.bar else { return };
        let elapsed = p.elapsed.as_secs_f64();
        let (len, pos, of) = match p.duration {
            Some(d) => (
                d.as_millis() as u64,
                p.elapsed.as_millis() as u64,
                format!(" / {:.1}s", d.as_secs_f64()),
            ),
            None => (0, 0, String::new()),
        };
        bar.set_length(len);
        bar.set_position(pos);
        bar.set_message(progress_line(elapsed, &of, p));
    }

    /// Removes the bar (safe to call more than once).
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// `12.3s / 30.0s  1234567 events  45.6 MiB  lost 0`.
fn progress_line(elapsed: f64, of: &str, p: &Progress) -> String {
    format!(
        "{elapsed:.1}s{of}  {} events  {:.1} MiB  lost {}",
        p.events,
        p.bytes as f64 / (1024.0 * 1024.0),
        p.lost
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_line_shows_time_events_size_and_loss() {
        let p = Progress {
            elapsed: Duration::from_millis(1500),
            duration: Some(Duration::from_secs(10)),
            bytes: 3 * 1024 * 1024,
            events: 42,
            lost: 7,
        };
        assert_eq!(
            progress_line(1.5, " / 10.0s", &p),
            "1.5s / 10.0s  42 events  3.0 MiB  lost 7"
        );
    }
}
