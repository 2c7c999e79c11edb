//! The one parser of `trace-cmd report` listings in the tests (this crate's and
//! trace-recipe's), for listings printed by trace-cmd and by our
//! [`crate::Printer`] / [`crate::format_record`] alike.

/// One event line of a `trace-cmd report` listing, split into its columns:
/// `[INSTANCE: ]COMM-PID [CPU] TIMESTAMP: EVENT: FIELDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportLine<'a> {
    /// The whole line as printed.
    pub line: &'a str,
    /// The instance name trace-cmd prints first in a file with several buffers.
    pub instance: Option<&'a str>,
    /// `comm-pid` (the comm may hold spaces and dashes; the pid follows the last `-`).
    pub task: &'a str,
    /// The CPU number in brackets.
    pub cpu: u32,
    /// The timestamp as printed (seconds.micros, or raw ns).
    pub timestamp: &'a str,
    /// The event name (`sched_switch`).
    pub event: &'a str,
    /// What follows the event name.
    pub fields: &'a str,
}

impl<'a> ReportLine<'a> {
    /// Splits one listing line; `None` for lines that are not events (stack
    /// frames `=> ...`, `cpus=N`, `CPU:N [N EVENTS DROPPED]`, blank lines).
    pub fn parse(line: &'a str) -> Option<ReportLine<'a>> {
        // The CPU column is the first ` [digits]` group.
        let mut search = 0;
        let (open, close, cpu) = loop {
            let open = search + line[search..].find(" [")?;
            let close = open + line[open..].find(']')?;
            if let Ok(cpu) = line[open + 2..close].parse::<u32>() {
                break (open, close, cpu);
            }
            search = open + 2;
        };
        let head = line[..open].trim();
        let (instance, task) = match head.split_once(": ") {
            Some((inst, task)) if !inst.contains(' ') => (Some(inst), task.trim()),
            _ => (None, head),
        };
        let (timestamp, rest) = line[close + 1..].split_once(": ")?;
        let (event, fields) = rest.split_once(':').unwrap_or((rest, ""));
        Some(ReportLine {
            line,
            instance,
            task,
            cpu,
            timestamp: timestamp.trim(),
            event: event.trim(),
            fields: fields.trim(),
        })
    }

    /// The comm part of `comm-pid`.
    pub fn comm(&self) -> &'a str {
        self.task.rsplit_once('-').map_or(self.task, |(c, _)| c)
    }

    /// The pid part of `comm-pid`. Panics when there is none.
    pub fn pid(&self) -> i32 {
        let pid = self.task.rsplit_once('-').map(|(_, p)| p.parse());
        pid.and_then(Result::ok)
            .unwrap_or_else(|| panic!("no pid in task `{}`", self.task))
    }

    /// The timestamp in nanoseconds; the listing must come from `report -t`
    /// (nine decimals). Panics otherwise.
    pub fn ns(&self) -> u64 {
        let (secs, frac) = self
            .timestamp
            .split_once('.')
            .unwrap_or((self.timestamp, ""));
        assert_eq!(frac.len(), 9, "`-t` prints nanoseconds: {}", self.timestamp);
        secs.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap()
    }

    /// Every column but the fields, whitespace-normalised: what two readers of
    /// the same file must agree on.
    pub fn key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}",
            self.instance.unwrap_or(""),
            self.task,
            self.cpu,
            self.timestamp,
            self.event
        )
    }

    /// The line as printed up to and including the colon after the event name
    /// (`[INSTANCE: ]COMM-PID [CPU] TIMESTAMP: EVENT:`), padding included: what
    /// two printers of the same file must print alike, byte for byte.
    pub fn head(&self) -> &'a str {
        // `event` is a slice of `line`, followed by its colon (or the line's end).
        let end = self.event.as_ptr() as usize - self.line.as_ptr() as usize + self.event.len();
        let end = if self.line[end..].starts_with(':') {
            end + 1
        } else {
            end
        };
        &self.line[..end]
    }
}

/// The comparable part of each record line of a listing: an event line's
/// [`ReportLine::head`], or a whole (trimmed) `CPU:N [N EVENTS DROPPED]` line.
/// Other lines (`cpus=N`, stack frames, blank lines) are left out.
pub fn heads(listing: &str) -> Vec<&str> {
    listing
        .lines()
        .filter(|l| !l.starts_with("cpus="))
        .filter_map(|l| match l.contains("EVENTS DROPPED]") {
            true => Some(l.trim()),
            false => ReportLine::parse(l).map(|r| r.head()),
        })
        .collect()
}

/// Asserts that two listings' [`heads`] agree line by line (naming the first
/// line that differs), then in number.
pub fn assert_same_heads(ours: &str, theirs: &str, what: &str) {
    let (ours, theirs) = (heads(ours), heads(theirs));
    for (i, (a, b)) in ours.iter().zip(theirs.iter()).enumerate() {
        assert_eq!(a, b, "{what}: line {i} differs");
    }
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{what}: {} lines from us, {} from trace-cmd",
        ours.len(),
        theirs.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_splits_into_its_columns_and_its_head() {
        let l = "inst:     my task-12  [001]  1.000002: sched_switch:         prev_comm=a";
        let r = ReportLine::parse(l).unwrap();
        assert_eq!(r.instance, Some("inst"));
        assert_eq!((r.comm(), r.pid(), r.cpu), ("my task", 12, 1));
        assert_eq!((r.timestamp, r.event), ("1.000002", "sched_switch"));
        assert_eq!(r.fields, "prev_comm=a");
        assert_eq!(
            r.head(),
            "inst:     my task-12  [001]  1.000002: sched_switch:"
        );
        let listing = format!("cpus=2\n{l}\n   => foo (ffff)\nCPU:1 [7 EVENTS DROPPED]\n");
        assert_eq!(heads(&listing), [r.head(), "CPU:1 [7 EVENTS DROPPED]"]);
        assert!(ReportLine::parse("CPU:1 [7 EVENTS DROPPED]").is_none());
    }
}
