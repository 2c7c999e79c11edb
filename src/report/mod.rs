//! Reports of a trace.dat: [`JsonReport`] (report.json) holds every number;
//! [`Template`] renders it as text (summary.txt) and [`render_html`] as a
//! self-contained page (report.html).

mod html;
mod json;
mod junit;
mod text;

pub use html::render_html;
pub use json::{
    CommCount, ExpectResult, JSON_FORMAT_VERSION, JsonReport, Lost, PidCount, RecorderInfo,
    RunInfo, WorkloadInfo, lost_percent,
};
pub use junit::render_junit;
pub use text::{DEFAULT_TEMPLATE, Template, TemplateError, dur};
