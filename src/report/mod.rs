//! Reports of a trace.dat: [`JsonReport`] (report.json) holds every number;
//! a [`Template`](crate::recipe::Template) renders it as text (summary.txt) and [`render_html`] as a
//! self-contained page (report.html).

mod expect;
mod flame;
mod html;
mod json;
mod junit;
mod text;
pub(crate) mod tracer;

pub(crate) use expect::{check_all, lookup, measure, show};
pub(crate) use html::esc;
pub use html::render_html;
pub(crate) use json::{
    ExpectResult, Lost, RecorderInfo, RunInfo, RunReport, ScopeInfo, WorkloadInfo, uname_release,
};
pub use json::{JSON_FORMAT_VERSION, JsonReport};
pub(crate) use junit::render_junit;
pub use text::{DEFAULT_TEMPLATE, dur};
