//! The kernel engine: an `[[answer]]` compiled to hist triggers
//! (Documentation/trace/histogram.rst), and their `hist` files read back
//! into an [`AnswerTable`].
//!
//! **One event**: one trigger on the event,
//! `hist:keys=K[,K...]:vals=hitcount[,F...]:sort=...:name=NAME [if FILTER]`,
//! `by` mapping to keys with modifiers (`common_comm`/`common_pid` →
//! `common_pid.execname`, `cpu` → `common_cpu`, `stack` → `stacktrace`,
//! `syscall(F)` → `F.syscall`, `sym(F)` → `F.sym`, `log2(F)` → `F.log2`,
//! `errno(F)` → `F`, whose value is read back as signed: hist keys print a
//! signed field sign-extended to 64 bits, as an unsigned number), `sum(F)`
//! and `avg(F)` to `vals=F`. No `by`: the table is keyed on `common_cpu`
//! and its rows summed.
//!
//! **A span** (`from` → `to`, matched on `match`): a synthetic event
//! `SYNTH u64 latency_us; TYPE FIELD; ...` (`synthetic_events`, global,
//! named after the run's probe group), a trigger on `from` saving its
//! timestamp per match key (`hist:keys=M:A_ts=common_timestamp.usecs`, and
//! each `from.FIELD` as a variable), a trigger on `to` computing the latency
//! and generating the synthetic event on a match
//! (`hist:keys=M:A_lat=common_timestamp.usecs-$A_ts:onmatch(SYS.FROM).trace(SYNTH,$A_lat,...)`;
//! before Linux 5.6 spelt `onmatch(SYS.FROM).SYNTH($A_lat,...)`), and the
//! answer's table on the synthetic event, keyed on the `by` keys and
//! `latency_us.log2` (the histogram), summing `latency_us`. The synthetic
//! event fires in the `to` event's context, so its `common_pid` and
//! `common_cpu` are the `to` event's.
//!
//! What hist triggers cannot compute makes [`compile`] fail with the reason,
//! and the answer goes to the trace engine (`engine = "auto"`) or is refused
//! (`engine = "kernel"`): `min(F)`/`max(F)` (hist values are sums), more than
//! 3 keys or 2 summed values (TRACING_MAP_KEYS_MAX / TRACING_MAP_VALS_MAX
//! with hitcount), `stack` of a span (the synthetic event's stack is the
//! trigger's), a dynamic string through a synthetic event before Linux 5.10.
//!
//! Every write is a plan step undone through the journal ([`KernelAnswer::writes`]).

use tracedat::{EventFormat, Field};

use super::{AnswerRow, AnswerTable, Bucket, Cell, EngineUsed, Latency, TableBuilder, TableHead};
use crate::analysis::SyscallTable;
use crate::kernel::KernelFacts;
use crate::recipe::{Answer, AnswerBy, AnswerValue, FieldRef, SortKey};
use crate::validate::{field_of, is_string_field};

/// Most keys of one hist trigger (kernel/trace/tracing_map.h, `TRACING_MAP_KEYS_MAX`).
const MAX_KEYS: usize = 3;
/// Most summed values of one hist trigger besides `hitcount`
/// (`TRACING_MAP_VALS_MAX` is 3, hitcount included).
const MAX_VALS: usize = 2;
/// The synthetic event's field holding a span's duration.
const LATENCY_FIELD: &str = "latency_us";

/// How a hist key's printed value becomes the answer's key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decode {
    /// `common_pid.execname` → the name (`bash [  12]` → `bash`).
    Comm,
    /// `common_pid.execname` → the pid.
    Pid,
    /// A number, signed when `signed` (the kernel prints it as u64).
    Number { signed: bool },
    /// A string, trailing blanks cut.
    Text,
    /// `errno(F)`: signed; negative values by their errno name.
    Errno,
    /// `F.syscall` → the name the trace engine gives the number in brackets
    /// (the ABI's table of the kernel's machine: `sendfile` where the kernel
    /// prints `sys_sendfile64`), else the kernel's name without `sys_`.
    Syscall(SyscallTable),
    /// `F.sym` → the symbol without its address and module.
    Sym,
    /// A number its event's print fmt shows as text (`prev_state` → `S`,
    /// `R+`; a `__print_symbolic` enum): that text, as the trace engine
    /// shows it ([`tracedat::FieldText`]); the format and the field's name.
    Shown(Box<EventFormat>, String),
    /// `F.log2` → `2^k`.
    Log2,
    /// `stacktrace` → frames outermost first, joined by `;`, without offsets
    /// and modules.
    Stack,
}

/// One `by` item read back: the key's printed name and how to decode it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyRead {
    /// The name the kernel prints for the key (`common_pid`, `id`, `stacktrace`).
    printed: String,
    /// How its value becomes the answer's key.
    decode: Decode,
}

/// An answer's hist triggers, compiled: which events, what they write, and
/// how the table reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelAnswer {
    /// The answer's name (part of the synthetic event's, table's and
    /// variables' names).
    answer: String,
    /// The one event (or a span's `to`), and whether it is one of the recipe's probes.
    subject: (String, bool),
    /// A span's parts.
    span: Option<SpanParts>,
    /// The keys of the answer's table (on the one event, or on the synthetic event).
    keys: Vec<String>,
    /// Its summed values besides hitcount.
    vals: Vec<String>,
    /// `sort=` of its trigger (display order of the `hist` file only: rows are
    /// sorted again after reading).
    sort: Option<String>,
    /// `where`, for the one event (or a span's `to`).
    filter: Option<String>,
    /// Each `by` item, read back.
    by: Vec<KeyRead>,
    /// Each `values` item, in order.
    values: Vec<AnswerValue>,
}

/// What a span adds: the `from` event, its saved variables and the synthetic event.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SpanParts {
    /// The `from` event, and whether it is one of the recipe's probes.
    from: (String, bool),
    /// The match fields (the same names on both ends).
    match_fields: Vec<String>,
    /// `from.FIELD`s saved on `from`, as (variable suffix, field).
    saved: Vec<(String, String)>,
    /// The synthetic event's fields after `latency_us`, as (type, name).
    fields: Vec<(String, String)>,
    /// The `trace()` parameters after the latency, one per field.
    params: Vec<String>,
    /// Whether the kernel spells the action `trace(SYNTH,...)` (5.6+).
    trace_keyword: bool,
}

/// One write of the kernel engine: `value` appended to `file`, undone by
/// appending `removal`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelWrite {
    /// The file: relative to the run's instance, or to the tracefs root when `global`.
    pub(crate) file: String,
    /// Whether `file` is a top-level file (`synthetic_events`).
    pub(crate) global: bool,
    /// What is appended.
    pub(crate) value: String,
    /// What undoes it (`!` + the command, `!SYNTH` for a synthetic event).
    pub(crate) removal: String,
}

/// The names a run gives an answer's kernel objects.
#[derive(Debug, Clone)]
pub(crate) struct RunNames<'a> {
    /// The run's probe group (`trace_recipe_PID`): probes' system, and the
    /// prefix of the synthetic event and table names (unique to the run).
    pub(crate) group: &'a str,
}

impl KernelAnswer {
    /// The synthetic event of a span: `trace_recipe_PID_ANSWER`.
    fn synth_name(&self, names: &RunNames<'_>) -> String {
        format!("{}_{}", names.group, self.answer)
    }

    /// The table's `name=` (the same as the synthetic event's name).
    fn table_name(&self, names: &RunNames<'_>) -> String {
        self.synth_name(names)
    }

    /// The event whose `hist` file holds the answer's table, as a path
    /// relative to the instance (`events/SYSTEM/EVENT`).
    pub(crate) fn table_dir(&self, names: &RunNames<'_>) -> String {
        match &self.span {
            Some(_) => format!("events/synthetic/{}", self.synth_name(names)),
            None => event_dir(&self.subject, names),
        }
    }

    /// The writes, in the order to apply them (undone in reverse): for a span
    /// the synthetic event, the table on it, the `from` trigger, then the `to`
    /// trigger; for one event its table. `scope(EVENT)` is the filter the run
    /// writes on EVENT for its scope (and-ed into the trigger's condition, as
    /// a hist trigger counts events the pid list and filters do not drop).
    pub(crate) fn writes(
        &self,
        names: &RunNames<'_>,
        scope: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<KernelWrite> {
        let trigger = |ev: &(String, bool), command: String| KernelWrite {
            file: format!("{}/trigger", event_dir(ev, names)),
            global: false,
            removal: format!("!{command}"),
            value: command,
        };
        let table = self.table_command(names);
        let Some(span) = &self.span else {
            let cond = crate::validate::and_filters(
                self.filter.as_deref(),
                scope(&self.subject.0).as_deref(),
            );
            return vec![trigger(&self.subject, with_if(table, cond.as_deref()))];
        };
        let synth = self.synth_name(names);
        let a = &self.answer;
        let mut def = format!("{synth} u64 {LATENCY_FIELD}");
        for (ty, name) in &span.fields {
            def.push_str(&format!("; {ty} {name}"));
        }
        let keys = span.match_fields.join(",");
        let mut from_cmd = format!("hist:keys={keys}:{a}_ts=common_timestamp.usecs");
        for (var, field) in &span.saved {
            from_cmd.push_str(&format!(":{a}_{var}={field}"));
        }
        let from_cond = scope(&span.from.0);
        let mut params = vec![format!("${a}_lat")];
        params.extend(span.params.iter().cloned());
        let (sys, ev) = span.from.0.split_once(':').unwrap_or((&span.from.0, ""));
        let sys = if span.from.1 { names.group } else { sys };
        let action = match span.trace_keyword {
            true => format!("trace({synth},{})", params.join(",")),
            false => format!("{synth}({})", params.join(",")),
        };
        let to_cmd = format!(
            "hist:keys={keys}:{a}_lat=common_timestamp.usecs-${a}_ts:onmatch({sys}.{ev}).{action}"
        );
        let to_cond =
            crate::validate::and_filters(self.filter.as_deref(), scope(&self.subject.0).as_deref());
        vec![
            KernelWrite {
                file: "synthetic_events".into(),
                global: true,
                removal: format!("!{synth}"),
                value: def,
            },
            KernelWrite {
                file: format!("events/synthetic/{synth}/trigger"),
                global: false,
                removal: format!("!{table}"),
                value: table,
            },
            trigger(&span.from, with_if(from_cmd, from_cond.as_deref())),
            trigger(&self.subject, with_if(to_cmd, to_cond.as_deref())),
        ]
    }

    /// The answer's table trigger (without its condition).
    fn table_command(&self, names: &RunNames<'_>) -> String {
        let mut vals = vec!["hitcount".to_string()];
        vals.extend(self.vals.iter().cloned());
        let mut cmd = format!("hist:keys={}:vals={}", self.keys.join(","), vals.join(","));
        if let Some(s) = &self.sort {
            cmd.push_str(&format!(":sort={s}"));
        }
        cmd.push_str(&format!(":name={}", self.table_name(names)));
        cmd
    }

    /// The answer's table from the text of the `hist` file of
    /// [`Self::table_dir`] (which may hold other triggers' tables too).
    pub(crate) fn read(
        &self,
        names: &RunNames<'_>,
        hist: &str,
        a: &Answer,
        top: usize,
    ) -> AnswerTable {
        let name = self.table_name(names);
        let text = tables(hist)
            .into_iter()
            .find(|t| table_is_named(t, &name))
            .unwrap_or("");
        let table = crate::report::tracer::parse_hist("", String::new(), text, usize::MAX);
        let mut builder = TableBuilder::new(&self.values);
        for row in &table.rows {
            builder.add(self.row(row));
        }
        let mut notes = vec![format!(
            "computed in the kernel by hist triggers (table `{name}`)"
        )];
        if text.is_empty() {
            notes.push(format!(
                "the kernel's `hist` file held no table named `{name}`: the answer is empty"
            ));
        }
        if self.values.contains(&AnswerValue::Latency) {
            notes.push("latency min, percentiles and max are the upper bounds of the kernel's power-of-two microsecond buckets (`.log2`); total is exact to the microsecond".into());
        }
        if self.by.iter().any(|k| k.decode == Decode::Comm) {
            notes.push("common_comm is the name each task had at its first event (the kernel's `common_pid.execname`), rows of tasks of the same name merged".into());
        }
        builder.finish(
            a.sort.as_ref(),
            top,
            TableHead {
                question: a.question.clone(),
                engine: EngineUsed::Kernel,
                keys: a.by.iter().map(ToString::to_string).collect(),
                dropped: table.dropped.unwrap_or(0),
                notes,
            },
        )
    }

    /// One row of the kernel's table as an answer row (not yet merged).
    fn row(&self, row: &crate::report::tracer::HistRow) -> AnswerRow {
        let keys = self
            .by
            .iter()
            .map(|k| {
                let raw = row.keys.get(&k.printed).map(String::as_str).or_else(|| {
                    // `stacktrace` prints as `common_stacktrace` on newer kernels.
                    (k.decode == Decode::Stack)
                        .then(|| row.keys.get("common_stacktrace").map(String::as_str))
                        .flatten()
                });
                decode(&k.decode, raw.unwrap_or(""))
            })
            .collect();
        let count = row.values.get("hitcount").copied().unwrap_or(0);
        let latency_bucket = self.span.as_ref().and_then(|_| {
            let raw = row.keys.get(LATENCY_FIELD)?;
            raw.trim()
                .trim_start_matches('~')
                .trim()
                .strip_prefix("2^")?
                .trim()
                .parse::<u32>()
                .ok()
        });
        let cells = self
            .values
            .iter()
            .map(|v| match v {
                AnswerValue::Count => Cell::Int(count as i64),
                AnswerValue::Sum(f) => Cell::Int(self.sum(row, f) as i64),
                AnswerValue::Avg(f) if count > 0 => {
                    Cell::Float(self.sum(row, f) as i64 as f64 / count as f64)
                }
                AnswerValue::Latency => {
                    let total = row.values.get(LATENCY_FIELD).copied().unwrap_or(0) as f64;
                    let buckets = vec![Bucket {
                        log2: latency_bucket.unwrap_or(0),
                        count,
                    }];
                    Latency::from_buckets(buckets, total).map_or(Cell::None, Cell::Latency)
                }
                _ => Cell::None,
            })
            .collect();
        AnswerRow { keys, count, cells }
    }

    /// The summed value of field `f` in `row`.
    fn sum(&self, row: &crate::report::tracer::HistRow, f: &FieldRef) -> u64 {
        let name = match (&self.span, f.from) {
            (Some(_), true) => format!("from_{}", f.name),
            _ => f.name.clone(),
        };
        row.values.get(&name).copied().unwrap_or(0)
    }
}

/// `events/SYSTEM/EVENT` of `ev` (a probe's in the run's group).
fn event_dir(ev: &(String, bool), names: &RunNames<'_>) -> String {
    let (sys, name) = ev.0.split_once(':').unwrap_or((&ev.0, ""));
    let sys = if ev.1 { names.group } else { sys };
    format!("events/{sys}/{name}")
}

/// `command` with ` if COND` when there is a condition.
fn with_if(command: String, cond: Option<&str>) -> String {
    match cond {
        Some(c) => format!("{command} if {c}"),
        None => command,
    }
}

/// The tables of a `hist` file, each from its `# event histogram` line (the
/// whole text when it has none).
fn tables(text: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = text
        .match_indices("# event histogram")
        .map(|(i, _)| i)
        .collect();
    if starts.is_empty() {
        return vec![text];
    }
    starts.push(text.len());
    starts.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

/// Whether a table's `# trigger info:` names it `name` (the kernel prints a
/// named trigger as `hist:NAME:keys=...`; `name=NAME` accepted too).
fn table_is_named(table: &str, name: &str) -> bool {
    table.lines().any(|l| {
        l.strip_prefix("# trigger info: ").is_some_and(|info| {
            info.starts_with(&format!("hist:{name}:")) || info.contains(&format!(":name={name}"))
        })
    })
}

/// A printed key value decoded as `how` says (see the module doc of [`super`]).
fn decode(how: &Decode, raw: &str) -> String {
    let raw = raw.trim();
    let number = || raw.parse::<u64>().ok();
    match how {
        Decode::Comm | Decode::Pid => {
            // `bash [      12]`: the name, then the pid in brackets.
            let (name, pid) = match raw.rsplit_once('[') {
                Some((n, p)) => (n.trim(), p.trim_end_matches(']').trim()),
                None => ("", raw),
            };
            match how {
                Decode::Comm => name.to_string(),
                _ => pid.to_string(),
            }
        }
        Decode::Number { signed: true } => {
            number().map_or(raw.to_string(), |n| (n as i64).to_string())
        }
        Decode::Number { signed: false } | Decode::Text => raw.to_string(),
        Decode::Shown(format, field) => match (number(), tracedat::FieldText::of(format, field)) {
            (Some(n), Some(text)) => text.render(n),
            _ => raw.to_string(),
        },
        Decode::Errno => match number().map(|n| n as i64) {
            Some(n) if n < 0 => crate::errno::name(-n).map_or(n.to_string(), |e| format!("-{e}")),
            Some(n) => n.to_string(),
            None => raw.to_string(),
        },
        Decode::Syscall(table) => {
            // `sys_read                      [  0]`.
            let (name, nr) = match raw.rsplit_once('[') {
                Some((n, nr)) => (n.trim(), nr.trim_end_matches(']').trim()),
                None => (raw, ""),
            };
            match (
                nr.parse::<i64>().map(|n| table.name(n)),
                name.strip_prefix("sys_"),
            ) {
                (Ok(known), _) if !known.starts_with("NR ") => known,
                (_, Some(n)) if !n.is_empty() => n.to_string(),
                _ => format!("NR {nr}"),
            }
        }
        // `[ffffffffc0a1b2c0] p9_fcall_init [9pnet]`: the name, without the
        // module the kernel prints after it.
        Decode::Sym => match raw.split_once(']') {
            Some((_, sym)) if !sym.trim().is_empty() => sym
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string(),
            Some((addr, _)) => addr.trim_start_matches('[').to_string(),
            None => raw.to_string(),
        },
        Decode::Log2 => raw.trim_start_matches('~').trim().to_string(),
        Decode::Stack => {
            // `p9_client_rpc+0x156/0x410 [9pnet]`: a frame, then its module.
            let mut frames: Vec<&str> = raw
                .split_whitespace()
                .filter(|f| !f.starts_with('['))
                .map(|f| f.split('+').next().unwrap_or(f))
                .filter(|f| !f.is_empty())
                .collect();
            frames.reverse();
            frames.join(";")
        }
    }
}

/// Type names `synthetic_events` accepts for a number
/// (kernel/trace/trace_events_synth.c, `synth_field_size`).
const SYNTH_NUMBER_TYPES: &[&str] = &[
    "s64",
    "u64",
    "s32",
    "u32",
    "s16",
    "u16",
    "s8",
    "u8",
    "char",
    "unsigned char",
    "int",
    "unsigned int",
    "short",
    "unsigned short",
    "long",
    "unsigned long",
    "bool",
    "pid_t",
    "gfp_t",
];

/// The synthetic event field type carrying field `f`: its own type name, so
/// that the kernel's check of a `trace()` parameter (`check_synth_field`)
/// compares equal. A number of another type (`size_t`, `dev_t`) is not passed:
/// the size-and-sign path of that check refused `u64` for a `size_t` variable
/// on 6.12 in the kernel lab ("Param type doesn't match synthetic event field
/// type"), so such an answer goes to trace.dat. Errors: why not, one sentence.
fn synth_type(f: &Field, facts: &KernelFacts) -> Result<String, String> {
    if is_string_field(f) {
        return match f.array_len {
            Some(n) if n > 0 && !f.type_name.starts_with("__data_loc") => Ok(format!("char[{n}]")),
            _ if facts.release_at_least(5, 10) => Ok("char[]".into()),
            _ => Err(format!(
                "`{}` is a dynamic string, which synthetic events carry only since Linux 5.10",
                f.name
            )),
        };
    }
    let ty = f.type_name.trim();
    match SYNTH_NUMBER_TYPES.contains(&ty) && f.array_len.is_none() {
        true => Ok(ty.to_string()),
        false => Err(format!(
            "`{}` is a `{ty}`, a type a synthetic event does not declare (it takes {}), and a span passes its `by`/`values` fields through one",
            f.name,
            SYNTH_NUMBER_TYPES.join(", ")
        )),
    }
}

/// Compiles answer `a` (values `values`, defaults applied) on the one event
/// or `to` event `subject` (`from` for a span), with `where` as `filter`
/// (already rewritten), for a kernel with hist triggers (`facts`). Errors:
/// why hist triggers cannot compute it, one sentence.
pub(crate) fn compile(
    a: &Answer,
    values: &[AnswerValue],
    subject: &(String, EventFormat, bool),
    from: Option<&(String, EventFormat, bool)>,
    filter: Option<&str>,
    facts: &KernelFacts,
) -> Result<KernelAnswer, String> {
    let mut keys: Vec<String> = Vec::new();
    let mut by = Vec::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut params: Vec<String> = Vec::new();
    let mut saved: Vec<(String, String)> = Vec::new();
    // A field of the answer as the table's event sees it: itself for one
    // event; through the synthetic event (a parameter) for a span.
    let mut carry = |f: &FieldRef| -> Result<(String, &Field), String> {
        let (format, name) = match (from, f.from) {
            (Some(fr), true) => (&fr.1, format!("from_{}", f.name)),
            _ => (&subject.1, f.name.clone()),
        };
        let field = field_of(format, &f.name).ok_or_else(|| format!("no field `{f}`"))?;
        if from.is_none() {
            return Ok((f.name.clone(), field));
        }
        if !fields.iter().any(|(_, n)| *n == name) {
            fields.push((synth_type(field, facts)?, name.clone()));
            params.push(match f.from {
                true => {
                    saved.push((format!("f_{}", f.name), f.name.clone()));
                    format!("${}_f_{}", a.name, f.name)
                }
                false => f.name.clone(),
            });
        }
        Ok((name, field))
    };
    for item in &a.by {
        let (key, read) = match item {
            AnswerBy::Comm | AnswerBy::Pid => (
                "common_pid.execname".to_string(),
                KeyRead {
                    printed: "common_pid".into(),
                    decode: if *item == AnswerBy::Comm {
                        Decode::Comm
                    } else {
                        Decode::Pid
                    },
                },
            ),
            AnswerBy::Cpu => (
                "common_cpu".to_string(),
                KeyRead {
                    printed: "common_cpu".into(),
                    decode: Decode::Number { signed: false },
                },
            ),
            AnswerBy::Stack if from.is_some() => {
                return Err("`stack` of a span: the synthetic event's stack would be the trigger's, not the `to` event's".into());
            }
            AnswerBy::Stack => (
                "stacktrace".to_string(),
                KeyRead {
                    printed: "stacktrace".into(),
                    decode: Decode::Stack,
                },
            ),
            AnswerBy::Field(f)
            | AnswerBy::Errno(f)
            | AnswerBy::Syscall(f)
            | AnswerBy::Sym(f)
            | AnswerBy::Log2(f) => {
                let (name, field) = carry(f)?;
                let (modifier, decode) = match item {
                    AnswerBy::Errno(_) => ("", Decode::Errno),
                    AnswerBy::Syscall(_) => (
                        ".syscall",
                        Decode::Syscall(SyscallTable::of_machine(&facts.arch)),
                    ),
                    AnswerBy::Sym(_) => (".sym", Decode::Sym),
                    AnswerBy::Log2(_) => (".log2", Decode::Log2),
                    _ if is_string_field(field) => ("", Decode::Text),
                    _ => {
                        let format = match (from, f.from) {
                            (Some(fr), true) => &fr.1,
                            _ => &subject.1,
                        };
                        match tracedat::FieldText::of(format, &f.name) {
                            Some(_) => {
                                ("", Decode::Shown(Box::new(format.clone()), f.name.clone()))
                            }
                            None => (
                                "",
                                Decode::Number {
                                    signed: field.signed,
                                },
                            ),
                        }
                    }
                };
                // The kernel prints a key under its field's name, without the modifier.
                (
                    format!("{name}{modifier}"),
                    KeyRead {
                        printed: name,
                        decode,
                    },
                )
            }
        };
        if !keys.contains(&key) {
            keys.push(key);
        }
        by.push(read);
    }
    let mut vals = Vec::new();
    for v in values {
        match v {
            AnswerValue::Count => {}
            AnswerValue::Latency => vals.push(LATENCY_FIELD.to_string()),
            AnswerValue::Sum(f) | AnswerValue::Avg(f) => {
                let (name, _) = carry(f)?;
                if !vals.contains(&name) {
                    vals.push(name);
                }
            }
            AnswerValue::Min(_) | AnswerValue::Max(_) => {
                return Err(format!(
                    "`{v}` has no hist-trigger equivalent (hist values are sums)"
                ));
            }
        }
    }
    if values.contains(&AnswerValue::Latency) {
        keys.push(format!("{LATENCY_FIELD}.log2"));
    }
    if keys.is_empty() {
        // One row: any key, rows summed after reading.
        keys.push("common_cpu".into());
    }
    if keys.len() > MAX_KEYS {
        return Err(format!(
            "hist triggers group by at most {MAX_KEYS} keys, and this answer needs {} ({}){}",
            keys.len(),
            keys.join(", "),
            if values.contains(&AnswerValue::Latency) {
                ", the latency histogram included"
            } else {
                ""
            }
        ));
    }
    if vals.len() > MAX_VALS {
        return Err(format!(
            "hist triggers sum at most {MAX_VALS} values besides hitcount, and this answer needs {} ({})",
            vals.len(),
            vals.join(", ")
        ));
    }
    let sort = a.sort.as_ref().and_then(|s| {
        let field = match &s.key {
            SortKey::Value(AnswerValue::Count) => "hitcount".to_string(),
            SortKey::Value(AnswerValue::Sum(f) | AnswerValue::Avg(f)) => match (from, f.from) {
                (Some(_), true) => format!("from_{}", f.name),
                _ => f.name.clone(),
            },
            _ => return None,
        };
        Some(format!(
            "{field}.{}",
            if s.descending {
                "descending"
            } else {
                "ascending"
            }
        ))
    });
    let span = from.map(|(name, _, on_probe)| SpanParts {
        from: (name.clone(), *on_probe),
        match_fields: a.match_or_default(),
        saved,
        fields,
        params,
        trace_keyword: facts.release_at_least(5, 6),
    });
    Ok(KernelAnswer {
        answer: a.name.clone(),
        subject: (subject.0.clone(), subject.2),
        span,
        keys,
        vals,
        sort,
        filter: filter.map(str::to_string),
        by,
        values: values.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::kernel::KernelFacts;
    use crate::validate::{ValidRecipe, validate};

    use crate::kernel::test_facts as facts;

    /// `answers` (TOML of `[[answer]]` tables) in a recipe, validated against `facts`.
    fn valid(answers: &str, facts: &KernelFacts) -> ValidRecipe {
        let text = format!("name = \"t\"\n[scope]\ninclude_self = true\n{answers}");
        let builtins = crate::recipe::Builtins::default();
        let loaded = crate::recipe::load_str(Path::new("r.toml"), &text, &[], &builtins).unwrap();
        validate(&loaded, facts, &Default::default()).unwrap_or_else(|d| panic!("{d:?}"))
    }

    const NAMES: RunNames<'static> = RunNames {
        group: "trace_recipe_7",
    };

    /// Each write of the answer named `name` of `v`, as `FILE << VALUE`.
    fn writes(v: &ValidRecipe, name: &str) -> Vec<String> {
        let a = v.answers.iter().find(|a| a.answer.name == name).unwrap();
        a.kernel
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: {}", a.why))
            .writes(&NAMES, &|_| None)
            .into_iter()
            .map(|w| format!("{} << {} (undo {})", w.file, w.value, w.removal))
            .collect()
    }

    #[test]
    fn one_event_answers_compile_to_one_named_hist_trigger() {
        let v = valid(
            r#"
[[answer]]
name = "signals"
event = "signal:signal_generate"
by = ["common_comm", "sig", "comm"]

[[answer]]
name = "open_errors"
event = "syscalls:sys_exit_openat"
by = ["errno(ret)"]
where = "ret == -ENOENT || ret == -EACCES"

[[answer]]
name = "syscalls"
event = "raw_syscalls:sys_enter"
by = ["syscall(id)", "common_pid"]
sort = "count"

[[answer]]
name = "allocs"
event = "kmem:kmalloc"
by = ["sym(call_site)", "log2(bytes_req)"]
values = ["count", "sum(bytes_req)", "avg(bytes_alloc)"]
sort = "-sum(bytes_req)"
"#,
            &facts("debian-6.12"),
        );
        assert_eq!(
            writes(&v, "signals"),
            [
                "events/signal/signal_generate/trigger << hist:keys=common_pid.execname,sig,comm:vals=hitcount:name=trace_recipe_7_signals (undo !hist:keys=common_pid.execname,sig,comm:vals=hitcount:name=trace_recipe_7_signals)"
            ]
        );
        // errno names in `where` become numbers; `errno(F)` keys on F.
        assert_eq!(
            writes(&v, "open_errors"),
            [
                "events/syscalls/sys_exit_openat/trigger << hist:keys=ret:vals=hitcount:name=trace_recipe_7_open_errors if ret == -2 || ret == -13 (undo !hist:keys=ret:vals=hitcount:name=trace_recipe_7_open_errors if ret == -2 || ret == -13)"
            ]
        );
        assert_eq!(
            writes(&v, "syscalls")[0],
            "events/raw_syscalls/sys_enter/trigger << hist:keys=id.syscall,common_pid.execname:vals=hitcount:sort=hitcount.ascending:name=trace_recipe_7_syscalls (undo !hist:keys=id.syscall,common_pid.execname:vals=hitcount:sort=hitcount.ascending:name=trace_recipe_7_syscalls)"
        );
        assert_eq!(
            writes(&v, "allocs")[0],
            "events/kmem/kmalloc/trigger << hist:keys=call_site.sym,bytes_req.log2:vals=hitcount,bytes_req,bytes_alloc:sort=bytes_req.descending:name=trace_recipe_7_allocs (undo !hist:keys=call_site.sym,bytes_req.log2:vals=hitcount,bytes_req,bytes_alloc:sort=bytes_req.descending:name=trace_recipe_7_allocs)"
        );
        // Each answer's events are recorded too (trace_dat defaults to true).
        let events: Vec<&str> = v.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            events,
            [
                "signal:signal_generate",
                "syscalls:sys_exit_openat",
                "raw_syscalls:sys_enter",
                "kmem:kmalloc"
            ]
        );
    }

    #[test]
    fn under_the_kernels_pid_list_every_trigger_has_a_condition() {
        // The run's threads traced (no exclusion filter) and a workload's pid
        // (42) in set_event_pid: the trigger gets an always-true condition,
        // so that the kernel applies the pid list to it.
        let v = valid(
            "[[answer]]\nname = \"s\"\nevent = \"raw_syscalls:sys_enter\"\nby = [\"syscall(id)\"]\n",
            &facts("debian-6.12"),
        );
        let plan = crate::plan::plan(&v, "i", "trace_recipe_7", &[42], &[], &[]);
        let triggers: Vec<&str> = plan
            .steps
            .iter()
            .filter_map(|s| match &s.op {
                crate::plan::Op::Write { file, value, .. } if file.ends_with("/trigger") => {
                    Some(value.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            triggers,
            ["hist:keys=id.syscall:vals=hitcount:name=trace_recipe_7_s if common_pid >= 0"]
        );
        // Without a pid list, none.
        let plan = crate::plan::plan(&v, "i", "trace_recipe_7", &[], &[], &[]);
        assert!(plan.steps.iter().any(|s| matches!(&s.op,
            crate::plan::Op::Write { value, .. } if value == "hist:keys=id.syscall:vals=hitcount:name=trace_recipe_7_s")));
    }

    #[test]
    fn a_span_compiles_to_a_synthetic_event_fed_by_onmatch() {
        let answers = r#"
[[answer]]
name = "wake"
from = "sched:sched_waking"
to = "sched:sched_wakeup"
match = ["pid"]
by = ["comm", "from.prio"]
values = ["count", "sum(target_cpu)", "latency"]
where = "prio < 100"
[[answer]]
name = "blk"
from = "block:block_rq_issue"
to = "block:block_rq_complete"
match = ["dev", "sector"]
by = ["dev"]
[output]
trace_dat = false
"#;
        let v = valid(answers, &facts("debian-6.12"));
        assert_eq!(
            writes(&v, "wake"),
            [
                "synthetic_events << trace_recipe_7_wake u64 latency_us; char[16] comm; int from_prio; int target_cpu (undo !trace_recipe_7_wake)",
                "events/synthetic/trace_recipe_7_wake/trigger << hist:keys=comm,from_prio,latency_us.log2:vals=hitcount,target_cpu,latency_us:name=trace_recipe_7_wake (undo !hist:keys=comm,from_prio,latency_us.log2:vals=hitcount,target_cpu,latency_us:name=trace_recipe_7_wake)",
                "events/sched/sched_waking/trigger << hist:keys=pid:wake_ts=common_timestamp.usecs:wake_f_prio=prio (undo !hist:keys=pid:wake_ts=common_timestamp.usecs:wake_f_prio=prio)",
                "events/sched/sched_wakeup/trigger << hist:keys=pid:wake_lat=common_timestamp.usecs-$wake_ts:onmatch(sched.sched_waking).trace(trace_recipe_7_wake,$wake_lat,comm,$wake_f_prio,target_cpu) if prio < 100 (undo !hist:keys=pid:wake_lat=common_timestamp.usecs-$wake_ts:onmatch(sched.sched_waking).trace(trace_recipe_7_wake,$wake_lat,comm,$wake_f_prio,target_cpu) if prio < 100)",
            ]
        );
        // A `dev_t`/`unsigned int` pair is refused by the kernel's parameter
        // check: that answer goes to trace.dat, and records its events.
        let blk = v.answers.iter().find(|a| a.answer.name == "blk").unwrap();
        assert_eq!(blk.engine, EngineUsed::Trace);
        assert!(
            blk.why
                .contains("`dev` is a `dev_t`, a type a synthetic event does not declare"),
            "{}",
            blk.why
        );
        // trace_dat = false: only the trace-engine answer's events are streamed.
        let events: Vec<&str> = v.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(events, ["block:block_rq_issue", "block:block_rq_complete"]);
        // The plan writes them in the run's instance, the definition at the top level.
        let plan = crate::plan::plan(&v, "i", "trace_recipe_7", &[], &[], &[]);
        let files: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|s| match &s.op {
                crate::plan::Op::Write { file, .. } => Some(file.clone()),
                _ => None,
            })
            .filter(|f| f.contains("trigger") || f.contains("synthetic"))
            .collect();
        assert_eq!(
            files,
            [
                "synthetic_events",
                "instances/i/events/synthetic/trace_recipe_7_wake/trigger",
                "instances/i/events/sched/sched_waking/trigger",
                "instances/i/events/sched/sched_wakeup/trigger",
            ]
        );
        // trace-cmd has no option for synthetic events: defined before, removed after.
        let export = crate::plan_export::trace_cmd(&plan, &v);
        assert!(
            export.contains("echo 'trace_recipe_7_wake u64 latency_us; char[16] comm; int from_prio; int target_cpu' >> /sys/kernel/tracing/synthetic_events\n"),
            "{export}"
        );
        assert!(
            export.contains("echo '!trace_recipe_7_wake' >> /sys/kernel/tracing/synthetic_events")
        );
    }

    #[test]
    fn what_hist_triggers_cannot_do_goes_to_trace_dat_and_says_why() {
        let v = valid(
            r#"
[[answer]]
name = "biggest"
event = "kmem:kmalloc"
by = ["common_comm"]
values = ["max(bytes_req)"]

[[answer]]
name = "four_keys"
event = "sched:sched_switch"
by = ["prev_comm", "next_comm", "prev_state", "cpu"]

[[answer]]
name = "stack_keys"
event = "syscalls:sys_exit_read"
by = ["stack", "common_comm", "cpu", "ret"]
"#,
            &facts("debian-6.12"),
        );
        let why = |n: &str| {
            let a = v.answers.iter().find(|a| a.answer.name == n).unwrap();
            assert_eq!(a.engine, EngineUsed::Trace, "{n}");
            a.why.clone()
        };
        assert!(why("biggest").contains("`max(bytes_req)` has no hist-trigger equivalent"));
        assert!(
            why("four_keys").contains("at most 3 keys"),
            "{}",
            why("four_keys")
        );
        assert!(why("stack_keys").contains("at most 3 keys"));
        // The stack answer records its events with stacks.
        assert!(
            v.events
                .iter()
                .all(|e| e.stacktrace == e.name.starts_with("syscalls:"))
        );
    }

    /// `text` as the kernel would print the table of a trigger named `name`.
    fn named(name: &str, keys: &str, rows: &str) -> String {
        format!(
            "# event histogram\n#\n# trigger info: hist:{name}:keys={keys}:vals=hitcount:sort=hitcount:size=2048 [active]\n#\n\n{rows}\nTotals:\n    Hits: 0\n    Entries: 0\n    Dropped: 3\n"
        )
    }

    #[test]
    fn hist_files_read_back_as_answer_tables() {
        let v = valid(
            r#"
[[answer]]
name = "by_syscall"
event = "raw_syscalls:sys_enter"
by = ["syscall(id)", "common_comm"]

[[answer]]
name = "wake"
from = "sched:sched_waking"
to = "sched:sched_wakeup"
match = ["pid"]
by = ["pid", "prio"]
"#,
            &facts("debian-6.1"),
        );
        let answer = |n: &str| v.answers.iter().find(|a| a.answer.name == n).unwrap();
        // Rows as histogram.rst and the sqlhist article print them
        // (`.execname` and `.syscall` keys), in another trigger's table first.
        let rows = "{ common_pid: bash            [     18116], id: sys_setpgid                   [109] } hitcount:          1\n{ common_pid: cat             [     18116], id: sys_munmap                    [ 11] } hitcount:          1\n{ common_pid: cat             [     18115], id: sys_munmap                    [ 11] } hitcount:          4\n{ common_pid: cat             [     18115], id: unknown_syscall               [999] } hitcount:          2\n";
        let text = format!(
            "{}{}",
            named("other", "id", "{ id: 3 } hitcount: 100\n"),
            named(
                "trace_recipe_7_by_syscall",
                "id.syscall,common_pid.execname",
                rows
            )
        );
        let a = answer("by_syscall");
        let t = a.kernel.as_ref().unwrap().read(&NAMES, &text, &a.answer, 2);
        assert_eq!(t.engine, EngineUsed::Kernel);
        assert_eq!(t.keys, ["syscall(id)", "common_comm"]);
        let rows: Vec<(Vec<String>, u64)> =
            t.rows.iter().map(|r| (r.keys.clone(), r.count)).collect();
        // cat's two pids merge into one row of 5 munmaps.
        assert_eq!(
            rows,
            [
                (vec!["munmap".to_string(), "cat".to_string()], 5),
                (vec!["NR 999".to_string(), "cat".to_string()], 2),
            ]
        );
        assert_eq!(t.other.as_ref().map(|o| o.count), Some(1));
        assert_eq!(t.total.count, 8);
        assert_eq!(t.dropped, 3);

        // The wakeup_latency table of histogram.rst (`pid, prio, lat.log2`),
        // under the names this run gives its synthetic event's fields.
        let rows = "{ pid:       2035, prio:          9, latency_us: ~ 2^2  } hitcount:         43  latency_us:        150\n{ pid:       2034, prio:          9, latency_us: ~ 2^2  } hitcount:         60  latency_us:        200\n{ pid:       2034, prio:          9, latency_us: ~ 2^5  } hitcount:          1  latency_us:         20\n";
        let text = named("trace_recipe_7_wake", "pid,prio,latency_us.log2", rows);
        let a = answer("wake");
        let k = a.kernel.as_ref().unwrap();
        assert_eq!(k.table_dir(&NAMES), "events/synthetic/trace_recipe_7_wake");
        assert!(
            k.writes(&NAMES, &|_| None)[3]
                .value
                .contains(".trace(trace_recipe_7_wake,$wake_lat,pid,prio)"),
            "6.1 spells the action trace()"
        );
        let t = k.read(&NAMES, &text, &a.answer, 20);
        assert_eq!(t.values, ["count", "latency"]);
        let r = &t.rows[0];
        assert_eq!(
            (r.keys.clone(), r.count),
            (vec!["2034".to_string(), "9".to_string()], 61)
        );
        let Cell::Latency(l) = &r.cells[1] else {
            panic!("{r:?}")
        };
        assert_eq!(
            l.buckets,
            [Bucket { log2: 2, count: 60 }, Bucket { log2: 5, count: 1 }]
        );
        assert_eq!(
            (l.total_us, l.p50_us, l.p99_us, l.max_us),
            (220.0, 4.0, 32.0, 32.0)
        );
        assert!(!l.exact);
        assert!(t.notes.iter().any(|n| n.contains("power-of-two")));
        // A file without the answer's table: empty, and said so.
        let t = k.read(&NAMES, "", &a.answer, 20);
        assert!(t.rows.is_empty() && t.notes.iter().any(|n| n.contains("no table")));
    }

    #[test]
    fn the_kernel_labs_6_12_table_reads_back_with_every_hit() {
        // As Debian 6.12 printed it in the kernel lab (answers/by_syscall.hist.txt
        // of a run of this answer; rows cut to four, the totals as printed):
        // a named trigger shows as `hist:name=NAME:keys=...`.
        let text = "# event histogram\n#\n# trigger info: hist:name=trace_recipe_7_by_syscall:keys=id.syscall:vals=hitcount:sort=hitcount:size=2048 if (common_pid != 164 && (common_pid < 166 || common_pid > 167) && common_pid != 169) || (common_flags & 0x58) [active]\n#\n\n{ id: sys_exit_group                [231] } hitcount:          1\n{ id: sys_close                     [  3] } hitcount:          1\n{ id: sys_wait4                     [ 61] } hitcount:          8\n{ id: sys_execve                    [ 59] } hitcount:          8\n\nTotals:\n    Hits: 18\n    Entries: 4\n    Dropped: 0\n";
        let v = valid(
            "[[answer]]\nname = \"by_syscall\"\nevent = \"raw_syscalls:sys_enter\"\nby = [\"syscall(id)\"]\n",
            &facts("debian-6.12"),
        );
        let a = &v.answers[0];
        let t = a.kernel.as_ref().unwrap().read(&NAMES, text, &a.answer, 3);
        let keys: Vec<&str> = t.rows.iter().map(|r| r.keys[0].as_str()).collect();
        // Ties by key; every hit counted (18 = `Hits:`).
        assert_eq!(keys, ["execve", "wait4", "close"]);
        assert_eq!((t.total.count, t.other.map(|o| o.count)), (18, Some(1)));
    }

    /// A key its event's print fmt shows as text reads back as that text,
    /// as the trace engine shows it: Debian 6.12's sched_switch `prev_state`
    /// (the hist file prints the number) as `S`, `I`, `R+`, `R`.
    #[test]
    fn a_state_key_reads_back_as_the_print_fmt_shows_it() {
        let text = "# event histogram\n#\n# trigger info: hist:name=trace_recipe_7_states:keys=prev_state:vals=hitcount:sort=hitcount:size=2048 [active]\n#\n\n{ prev_state:          0 } hitcount:          2\n{ prev_state:        256 } hitcount:          3\n{ prev_state:        128 } hitcount:          4\n{ prev_state:          1 } hitcount:          5\n\nTotals:\n    Hits: 14\n    Entries: 4\n    Dropped: 0\n";
        let v = valid(
            "[[answer]]\nname = \"states\"\nevent = \"sched:sched_switch\"\nby = [\"prev_state\"]\n",
            &facts("debian-6.12"),
        );
        let a = &v.answers[0];
        let t = a.kernel.as_ref().unwrap().read(&NAMES, text, &a.answer, 10);
        let rows: Vec<(&str, u64)> = t
            .rows
            .iter()
            .map(|r| (r.keys[0].as_str(), r.count))
            .collect();
        assert_eq!(rows, [("S", 5), ("I", 4), ("R+", 3), ("R", 2)]);
    }

    #[test]
    fn printed_keys_decode_as_the_trace_engine_writes_them() {
        assert_eq!(decode(&Decode::Errno, "18446744073709551614"), "-ENOENT");
        assert_eq!(decode(&Decode::Errno, "3"), "3");
        assert_eq!(
            decode(&Decode::Number { signed: true }, "18446744073709551615"),
            "-1"
        );
        assert_eq!(decode(&Decode::Number { signed: false }, "   42"), "42");
        assert_eq!(
            decode(
                &Decode::Sym,
                "[ffffffffb787c3f0] tomoyo_find_next_domain                       "
            ),
            "tomoyo_find_next_domain"
        );
        assert_eq!(
            decode(&Decode::Sym, "[ffffffffb787c3f0]"),
            "ffffffffb787c3f0"
        );
        // As Debian 6.12 printed them in the kernel lab: a module's function
        // with its module after it, in a `.sym` key and in a stack.
        assert_eq!(
            decode(&Decode::Sym, "[ffffffffc06e1234] p9_fcall_init [9pnet]   "),
            "p9_fcall_init"
        );
        assert_eq!(
            decode(
                &Decode::Stack,
                "__schedule+0x5bc/0xbf0 p9_client_rpc+0x156/0x410 [9pnet] vfs_write+0x28f/0x460"
            ),
            "vfs_write;p9_client_rpc;__schedule"
        );
        // `.syscall` names from the ABI's table, as the trace engine does:
        // the kernel prints its function's name (sys_sendfile64) for NR 40.
        let x86 = Decode::Syscall(SyscallTable::of_machine("x86_64"));
        assert_eq!(
            decode(&x86, "sys_sendfile64                [ 40]"),
            "sendfile"
        );
        assert_eq!(
            decode(&x86, "unknown_syscall               [999]"),
            "NR 999"
        );
        let unknown = Decode::Syscall(SyscallTable::of_machine("riscv64"));
        assert_eq!(decode(&unknown, "sys_read [63]"), "read");
        assert_eq!(decode(&Decode::Log2, "~ 2^12 "), "2^12");
        assert_eq!(
            decode(
                &Decode::Stack,
                "do_sys_openat2+0x5/0x10 __x64_sys_openat+0x1/0x2"
            ),
            "__x64_sys_openat;do_sys_openat2"
        );
        assert_eq!(
            decode(&Decode::Text, "migration/4                    "),
            "migration/4"
        );
    }
}
